# Start both approved runs: the main run and $OTHER.
bluetape-flow run-start --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner \
  --evidence '[{"kind": "plan", "summary": "main session started the api/web plan"}]' \
  --at 2026-07-14T01:00:02Z
bluetape-flow run-start --run-id "$OTHER" \
  --owner-file .bluetape/handles/other.owner \
  --evidence '[{"kind": "plan", "summary": "main session started the hotfix"}]' \
  --at 2026-07-14T01:00:03Z
