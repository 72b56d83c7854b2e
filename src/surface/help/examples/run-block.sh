# The hotfix cannot go on without the key: block the run $OTHER as well.
# (A blocked run stays blocked; receipt-diagnose can still read it.)
cat > block-other.json <<'EOF'
[{"kind": "plan", "summary": "hotfix waits for a production api key"}]
EOF
bluetape-flow run-block --run-id "$OTHER" \
  --owner-file .bluetape/handles/other.owner \
  --evidence block-other.json --at 2026-07-14T01:23:00Z \
  --reason "production api key missing"
