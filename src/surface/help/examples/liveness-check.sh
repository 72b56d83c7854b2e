# At 01:06, after api's lease ran out, ask what to do about each lane;
# the answers are kept for stall-record, and --decision-out writes each
# lane's decision file (--explain alone adds the keys without a file).
for lane in api web docs; do
  bluetape-flow liveness-check --run-id "$RUN" --lane-id "$lane" \
    --at 2026-07-14T01:06:00Z --decision-out "decision-$lane.json" \
    | tee "liveness-$lane.json"
done
