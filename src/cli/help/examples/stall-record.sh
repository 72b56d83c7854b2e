# Record the stalls liveness-check suspected. Each record binds its
# decision by checksum: the SHA-256 of the decision's canonical JSON
# (compact, keys sorted), rebuilt here from the saved answer.
for spec in "api agent-1" "web agent-2" "docs agent-3"; do
  read -r lane agent <<< "$spec"
  action=$(sed -E 's/.*"action": "([^"]*)".*/\1/' "liveness-$lane.json")
  reason=$(sed -E 's/.*"reason": "([^"]*)".*/\1/' "liveness-$lane.json")
  printf '{"action":"%s","reason":"%s"}' "$action" "$reason" \
    > "decision-$lane.json"
  sum=$(sha256sum "decision-$lane.json" | cut -d' ' -f1)
  cat > "stall-$lane.json" <<EOF
[{"kind": "liveness", "summary": "liveness decision for $lane at 01:06",
  "checksum": "$sum"}]
EOF
  bluetape-flow stall-record --run-id "$RUN" \
    --owner-file .bluetape/handles/main.owner --lane-id "$lane" \
    --agent-id "$agent" --at 2026-07-14T01:06:00Z --reason "$reason" \
    --decision "decision-$lane.json" --evidence "stall-$lane.json"
done
