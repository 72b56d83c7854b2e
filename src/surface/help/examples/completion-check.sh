# List what still keeps the run from completing: here only the main
# session's own verification (missing_main_verification), which complete
# records.
bluetape-flow completion-check --run-id "$RUN"
