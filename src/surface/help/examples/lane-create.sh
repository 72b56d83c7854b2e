# Create the lanes: one per component of the main run, and two of $OTHER
# (the hotfix, and its release notes) that the lane-block and lane-cancel
# examples end. Each has its agent, assignment, write scope and deadlines
# (startup ACK within 30 s, the command within 10 minutes).
for spec in "main api agent-1 src/api" "main web agent-2 src/web" \
  "main docs agent-3 docs" "other hotfix agent-7 src/web" "other notes agent-6 docs"
do
  read -r handle lane agent scope <<< "$spec"
  run=$RUN; if [ "$handle" = other ]; then run=$OTHER; fi
  cat > "lane-$lane.json" <<EOF
{"lane_id": "$lane", "agent_id": "$agent", "assignment": "Build the $lane",
 "write_scope": ["$scope"], "fallback": "main session",
 "observed_at": "2026-07-14T01:00:05Z",
 "startup_ack_deadline": "2026-07-14T01:00:35Z",
 "command_deadline": "2026-07-14T01:10:00Z"}
EOF
  bluetape-flow lane-create --run-id "$run" \
    --owner-file ".bluetape/handles/$handle.owner" --input "lane-$lane.json" \
    --evidence "[{\"kind\": \"plan\",
      \"summary\": \"assign the $lane lane to $agent\"}]"
done
