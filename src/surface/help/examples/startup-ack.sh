# Each agent acknowledged its assignment in time (starting -> running).
for spec in "api agent-1" "web agent-2" "docs agent-3"; do
  read -r lane agent <<< "$spec"
  bluetape-flow startup-ack --run-id "$RUN" \
    --owner-file .bluetape/handles/main.owner --lane-id "$lane" \
    --agent-id "$agent" --at 2026-07-14T01:00:07Z \
    --evidence "[{\"kind\": \"lifecycle\",
      \"summary\": \"$agent acknowledged the $lane lane\"}]"
done
