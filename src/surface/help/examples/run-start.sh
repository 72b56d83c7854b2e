# Start the three approved runs: the main run, $OTHER and alice's $KEYED
# (each with its own owner handle).
for spec in "$RUN main api/web" "$OTHER other hotfix" "$KEYED keyed signed"; do
  read -r run handle plan <<< "$spec"
  bluetape-flow run-start --run-id "$run" \
    --owner-file ".bluetape/handles/$handle.owner" \
    --evidence "[{\"kind\": \"plan\",
      \"summary\": \"main session started the $plan plan\"}]" \
    --at 2026-07-14T01:00:05Z
done
