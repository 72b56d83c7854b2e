# The hotfix cannot go on without the key: block the run $OTHER as well.
# (A blocked run stays blocked; receipt-diagnose can still read it.)
bluetape-flow run-block --run-id "$OTHER" \
  --owner-file .bluetape/handles/other.owner \
  --evidence '[{"kind": "plan", "summary": "hotfix waits for a production api key"}]' \
  --at 2026-07-14T01:03:00Z \
  --reason "production api key missing"
