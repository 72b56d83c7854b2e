# Cover api and web: each owner lane completed and its checks pass.
at=45
for component in api web; do
  cat > "cover-$component.json" <<EOF
{"component_id": "$component"}
EOF
  cat > "cover-$component-ev.json" <<EOF
[{"kind": "verification", "summary": "$component verified at the head"}]
EOF
  bluetape-flow component-evidence --run-id "$RUN" \
    --owner-file .bluetape/handles/main.owner \
    --input "cover-$component.json" --evidence "cover-$component-ev.json" \
    --at "2026-07-14T01:23:${at}Z"
  at=$((at + 5))
done
