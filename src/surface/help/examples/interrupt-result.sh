# agent-3 never answered. Past the probe and command deadlines, with its
# command still alive, liveness-check says "interrupt"; the main session
# interrupts the agent natively and records the result.
bluetape-flow liveness-check --run-id "$RUN" --lane-id docs \
  --at 2026-07-14T01:10:30Z --command-status alive
bluetape-flow interrupt-result --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner --lane-id docs \
  --agent-id agent-3 --at 2026-07-14T01:10:30Z \
  --evidence '[{"kind": "tool", "summary": "interrupt_agent returned interrupted"}]'
