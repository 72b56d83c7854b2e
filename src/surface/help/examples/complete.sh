# Record the main session's verification and complete the run, only if
# the receipt head is still the one just verified (--expected-head).
# (session-2.owner: the handle the resume example moved the run to.)
bluetape-flow verify --run-id "$RUN" > head.json
head=$(sed -E 's/.*"checksum": "([0-9a-f]+)".*/\1/' head.json)
bluetape-flow complete --run-id "$RUN" \
  --owner-file .bluetape/handles/session-2.owner \
  --expected-head "$head" \
  --evidence '[{"kind": "verification", "summary": "main session verified the result"}]' \
  --at 2026-07-14T01:30:00Z
