# Block a lane that cannot go on. Also in $OTHER: its hotfix lane is
# spawned, then its agent finds the production key missing.
bluetape-flow lane-start --run-id "$OTHER" \
  --owner-file .bluetape/handles/other.owner --lane-id hotfix \
  --agent-id agent-7 --at 2026-07-14T01:00:15Z \
  --evidence '[{"kind": "lifecycle", "summary": "spawned agent-7 for the hotfix lane"}]'
bluetape-flow lane-block --run-id "$OTHER" \
  --owner-file .bluetape/handles/other.owner --lane-id hotfix \
  --agent-id agent-7 --at 2026-07-14T01:02:00Z \
  --reason "production api key missing" \
  --evidence '[{"kind": "log", "summary": "agent-7: no production api key available"}]'
