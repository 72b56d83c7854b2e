# Start both approved runs: the main run and $OTHER.
cat > start.json <<'EOF'
[{"kind": "plan", "summary": "main session started the api/web plan"}]
EOF
bluetape-flow run-start --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner \
  --evidence start.json --at 2026-07-14T01:00:02Z
cat > start-other.json <<'EOF'
[{"kind": "plan", "summary": "main session started the hotfix"}]
EOF
bluetape-flow run-start --run-id "$OTHER" \
  --owner-file .bluetape/handles/other.owner \
  --evidence start-other.json --at 2026-07-14T01:00:03Z
