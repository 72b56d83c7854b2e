# Record the stalls liveness-check suspected, with what it printed: the
# decision file it wrote (--decision-out), its reason, and its
# decision_checksum, which an evidence item must carry.
for spec in "api agent-1" "web agent-2" "docs agent-3"; do
  read -r lane agent <<< "$spec"
  sum=$(sed -E 's/.*"decision_checksum": "([0-9a-f]{64})".*/\1/' "liveness-$lane.json")
  reason=$(sed -E 's/.*"reason": "([^"]*)".*/\1/' "liveness-$lane.json")
  bluetape-flow stall-record --run-id "$RUN" \
    --owner-file .bluetape/handles/main.owner --lane-id "$lane" \
    --agent-id "$agent" --at 2026-07-14T01:06:00Z --reason "$reason" \
    --decision "decision-$lane.json" \
    --evidence "[{\"kind\": \"liveness\",
      \"summary\": \"liveness decision for $lane at 01:06\",
      \"checksum\": \"$sum\"}]"
done
