# agent-1 reports progress: renew the api lane's silence lease to 01:05.
# (A heartbeat proves liveness only; it never completes a lane.)
cat > heartbeat.json <<'EOF'
{"lane_id": "api", "agent_id": "agent-1",
 "observed_at": "2026-07-14T01:00:08Z",
 "silence_lease_deadline": "2026-07-14T01:05:00Z",
 "reason": "still compiling"}
EOF
bluetape-flow heartbeat --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner \
  --input heartbeat.json \
  --evidence '[{"kind": "log", "summary": "api tests compiling", "exit_status": 0}]'
