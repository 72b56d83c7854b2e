# A cancelled lane keeps its run from completing, so this happens in
# $OTHER (see the approvals example): a lane for release notes is created,
# then dropped before it starts.
cat > lane-notes.json <<'EOF'
{"lane_id": "notes", "agent_id": "agent-6", "write_scope": ["docs"],
 "assignment": "Write the hotfix release notes",
 "fallback": "main session", "observed_at": "2026-07-14T01:20:00Z",
 "startup_ack_deadline": "2026-07-14T01:20:30Z",
 "command_deadline": "2026-07-14T01:40:00Z"}
EOF
bluetape-flow lane-create --run-id "$OTHER" \
  --owner-file .bluetape/handles/other.owner \
  --input lane-notes.json \
  --evidence '[{"kind": "plan", "summary": "assign the release notes to agent-6"}]'
bluetape-flow lane-cancel --run-id "$OTHER" \
  --owner-file .bluetape/handles/other.owner --lane-id notes \
  --agent-id agent-6 --at 2026-07-14T01:20:10Z \
  --reason "not needed for a hotfix" \
  --evidence '[{"kind": "plan", "summary": "user: a hotfix needs no release notes"}]'
