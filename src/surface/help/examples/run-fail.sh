# Fail a run that cannot reach its goal. A failed run stays failed, so
# this uses a new run, $SPIKE: init prints its run_id; it is approved and
# started, and its benchmark shows the idea does not work.
SPIKE=$(bluetape-flow init --workflow-type A --repo-root . \
  --owner-file .bluetape/handles/spike.owner --component api \
  --at 2026-07-14T01:59:00Z | sed -E 's/.*"run_id": "([^"]*)".*/\1/')
bluetape-flow run-approve --run-id "$SPIKE" \
  --owner-file .bluetape/handles/spike.owner \
  --evidence '[{"kind": "user_approval", "summary": "user approved the caching spike"}]' \
  --at 2026-07-14T02:00:00Z
bluetape-flow run-start --run-id "$SPIKE" \
  --owner-file .bluetape/handles/spike.owner \
  --evidence '[{"kind": "plan", "summary": "main session started the caching spike"}]' \
  --at 2026-07-14T02:00:01Z
bluetape-flow run-fail --run-id "$SPIKE" \
  --owner-file .bluetape/handles/spike.owner \
  --evidence '[{"kind": "test", "summary": "benchmark: caching gains nothing"}]' \
  --at 2026-07-14T02:10:00Z --reason "caching gives no measurable gain"
