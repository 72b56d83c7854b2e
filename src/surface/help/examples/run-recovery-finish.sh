# The build is repaired: the run is running again.
cat > recovered.json <<'EOF'
[{"kind": "test", "summary": "integration build passes again"}]
EOF
bluetape-flow run-recovery-finish --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner --evidence recovered.json \
  --at 2026-07-14T01:27:00Z
