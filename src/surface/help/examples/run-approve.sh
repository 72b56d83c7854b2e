# Approve the main run's plan. Then alice approves $OTHER: its policy
# takes her identity from BLUETAPE_APPROVED_BY, never from an option.
bluetape-flow run-approve --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner \
  --evidence '[{"kind": "user_approval", "summary": "user approved the api/web plan"}]' \
  --at 2026-07-14T01:00:00Z
BLUETAPE_APPROVED_BY=alice bluetape-flow run-approve --run-id "$OTHER" \
  --owner-file .bluetape/handles/other.owner \
  --evidence '[{"kind": "user_approval", "summary": "alice approved the hotfix plan"}]' \
  --at 2026-07-14T01:00:01Z
