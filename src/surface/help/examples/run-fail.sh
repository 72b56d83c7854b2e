# Fail a run that cannot reach its goal: $KEYED, alice's signed run (see
# the approval-statement example), was started with the others, and its
# benchmark shows the idea does not work. A failed run stays failed.
bluetape-flow run-fail --run-id "$KEYED" \
  --owner-file .bluetape/handles/keyed.owner \
  --evidence '[{"kind": "test", "summary": "benchmark: caching gains nothing"}]' \
  --at 2026-07-14T02:10:00Z --reason "caching gives no measurable gain"
