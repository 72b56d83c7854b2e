# Probe the silent web and docs agents; each must answer within 60 s.
for spec in "web agent-2" "docs agent-3"; do
  read -r lane agent <<< "$spec"
  bluetape-flow probe-sent --run-id "$RUN" \
    --owner-file .bluetape/handles/main.owner --lane-id "$lane" \
    --agent-id "$agent" --at 2026-07-14T01:06:10Z \
    --deadline 2026-07-14T01:07:00Z \
    --evidence "[{\"kind\": \"tool\",
      \"summary\": \"send_message status probe to $agent\"}]"
done
