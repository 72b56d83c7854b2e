# The fresh session checks the run before it takes over (read-only):
# owner epoch, lanes still to observe, incomplete replacements, head.
bluetape-flow resume-check --run-id "$RUN"
