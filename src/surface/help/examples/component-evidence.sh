# Cover api and web: each owner lane completed and its checks pass.
at=45
for component in api web; do
  bluetape-flow component-evidence --run-id "$RUN" \
    --owner-file .bluetape/handles/main.owner \
    --input "{\"component_id\": \"$component\"}" \
    --evidence "[{\"kind\": \"verification\",
      \"summary\": \"$component verified at the head\"}]" \
    --at "2026-07-14T01:23:${at}Z"
  at=$((at + 5))
done
