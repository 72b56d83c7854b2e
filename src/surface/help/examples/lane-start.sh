# Record that each lane's agent was spawned (pending -> starting).
for spec in "api agent-1" "web agent-2" "docs agent-3"; do
  read -r lane agent <<< "$spec"
  bluetape-flow lane-start --run-id "$RUN" \
    --owner-file .bluetape/handles/main.owner --lane-id "$lane" \
    --agent-id "$agent" --at 2026-07-14T01:00:06Z \
    --evidence "[{\"kind\": \"lifecycle\",
      \"summary\": \"spawned $agent for the $lane lane\"}]"
done
