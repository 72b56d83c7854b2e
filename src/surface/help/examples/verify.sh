# Check the whole receipt's hash chain (read-only): event count and head.
bluetape-flow verify --run-id "$RUN"
