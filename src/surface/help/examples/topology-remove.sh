# Drop the optional docs component (nothing depends on it) from this run.
cat > remove-docs.json <<'EOF'
[{"kind": "plan", "summary": "user: the guide ships with the next release"}]
EOF
bluetape-flow topology-remove --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner --component-id docs \
  --reason "the guide ships with the next release" --evidence remove-docs.json \
  --at 2026-07-14T01:23:20Z
