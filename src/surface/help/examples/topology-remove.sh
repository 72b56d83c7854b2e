# Drop the optional docs component (nothing depends on it) from this run.
bluetape-flow topology-remove --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner --component-id docs \
  --reason "the guide ships with the next release" \
  --evidence '[{"kind": "plan", "summary": "user: the guide ships with the next release"}]' \
  --at 2026-07-14T01:23:20Z
