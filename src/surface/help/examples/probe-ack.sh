# agent-2 answers the probe in time: the web lane is running again.
bluetape-flow probe-ack --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner --lane-id web \
  --agent-id agent-2 --at 2026-07-14T01:06:30Z \
  --evidence '[{"kind": "lifecycle", "summary": "agent-2 answered the status probe"}]'
