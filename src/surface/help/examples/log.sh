# The verified timeline of the main run, as a table, then only api's
# events as JSON lines.
bluetape-flow log --run-id "$RUN" --format table
bluetape-flow log --run-id "$RUN" --lane api --format jsonl
