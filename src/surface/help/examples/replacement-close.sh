# docs-2 completed, so close the docs lineage: docs takes docs-2's state.
bluetape-flow replacement-close --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner --lane-id docs \
  --replacement-lane-id docs-2 --at 2026-07-14T01:16:30Z \
  --evidence '[{"kind": "lineage", "summary": "replacement docs-2 completed"}]'
