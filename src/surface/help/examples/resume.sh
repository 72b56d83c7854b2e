# Take the run over: a new owner handle at the next epoch; the old handle
# is removed, and any copy of it is refused from now on. The examples
# after this one use .bluetape/handles/session-2.owner.
bluetape-flow resume --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner \
  --new-owner-file .bluetape/handles/session-2.owner \
  --evidence '[{"kind": "user_approval", "summary": "user approved the hand-over"}]' \
  --at 2026-07-14T01:29:00Z
