# Create a lane per component: its agent, assignment, write scope and
# deadlines (startup ACK within 30 s, the command within 10 minutes).
for spec in "api agent-1 src/api" "web agent-2 src/web" "docs agent-3 docs"
do
  read -r lane agent scope <<< "$spec"
  cat > "lane-$lane.json" <<EOF
{"lane_id": "$lane", "agent_id": "$agent", "assignment": "Build the $lane",
 "write_scope": ["$scope"], "fallback": "main session",
 "observed_at": "2026-07-14T01:00:05Z",
 "startup_ack_deadline": "2026-07-14T01:00:35Z",
 "command_deadline": "2026-07-14T01:10:00Z"}
EOF
  bluetape-flow lane-create --run-id "$RUN" \
    --owner-file .bluetape/handles/main.owner --input "lane-$lane.json" \
    --evidence "[{\"kind\": \"plan\",
      \"summary\": \"assign the $lane lane to $agent\"}]"
done
