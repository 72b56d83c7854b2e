# agent-1 turns out to be busy, not stuck: fresh output clears the stall.
bluetape-flow stall-clear --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner --lane-id api \
  --agent-id agent-1 --at 2026-07-14T01:06:05Z \
  --reason "fresh test output" \
  --evidence '[{"kind": "log", "summary": "agent-1 posted fresh api test output"}]'
