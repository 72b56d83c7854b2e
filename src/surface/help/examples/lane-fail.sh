# agent-2's web tests fail against the new api: record the failure. The
# evidence is compact JSON (canonical) because lane-resolve hashes it.
cat > fail-web.json <<'EOF'
[{"kind":"test","summary":"web tests fail against the new api"}]
EOF
bluetape-flow lane-fail --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner --lane-id web \
  --agent-id agent-2 --at 2026-07-14T01:12:00Z \
  --reason "web tests fail" --evidence fail-web.json
# A failed lane stays failed; the fix goes to a child lane, web-fix
# (parent_lane_id web): create it, spawn it, let its agent acknowledge.
cat > lane-web-fix.json <<'EOF'
{"lane_id": "web-fix", "agent_id": "agent-5", "parent_lane_id": "web",
 "assignment": "Fix the web pages", "write_scope": ["src/web"],
 "fallback": "main session", "observed_at": "2026-07-14T01:12:10Z",
 "startup_ack_deadline": "2026-07-14T01:12:40Z",
 "command_deadline": "2026-07-14T01:40:00Z"}
EOF
bluetape-flow lane-create --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner \
  --input lane-web-fix.json \
  --evidence '[{"kind": "plan", "summary": "assign the web fix to agent-5"}]'
for step in lane-start startup-ack; do  # spawned, then acknowledged
  bluetape-flow "$step" --run-id "$RUN" \
    --owner-file .bluetape/handles/main.owner --lane-id web-fix \
    --agent-id agent-5 --at 2026-07-14T01:12:15Z \
    --evidence "[{\"kind\": \"lifecycle\",
      \"summary\": \"$step of web-fix (agent-5)\"}]"
done
