# Block a lane that cannot go on. Also in $OTHER: its hotfix lane is
# created and spawned, then its agent finds the production key missing.
cat > lane-hotfix.json <<'EOF'
{"lane_id": "hotfix", "agent_id": "agent-7", "write_scope": ["src/web"],
 "assignment": "Patch the login page",
 "fallback": "main session", "observed_at": "2026-07-14T01:21:00Z",
 "startup_ack_deadline": "2026-07-14T01:21:30Z",
 "command_deadline": "2026-07-14T01:40:00Z"}
EOF
bluetape-flow lane-create --run-id "$OTHER" \
  --owner-file .bluetape/handles/other.owner \
  --input lane-hotfix.json \
  --evidence '[{"kind": "plan", "summary": "assign the login patch to agent-7"}]'
bluetape-flow lane-start --run-id "$OTHER" \
  --owner-file .bluetape/handles/other.owner --lane-id hotfix \
  --agent-id agent-7 --at 2026-07-14T01:21:05Z \
  --evidence '[{"kind": "lifecycle", "summary": "spawned agent-7 for the hotfix lane"}]'
bluetape-flow lane-block --run-id "$OTHER" \
  --owner-file .bluetape/handles/other.owner --lane-id hotfix \
  --agent-id agent-7 --at 2026-07-14T01:22:00Z \
  --reason "production api key missing" \
  --evidence '[{"kind": "log", "summary": "agent-7: no production api key available"}]'
