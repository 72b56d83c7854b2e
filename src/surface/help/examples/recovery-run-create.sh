# Supersede a run whose receipt is damaged: a new run takes over with a
# new owner handle, and the damaged receipt is copied to quarantine as is.
# A small run, $NOTES, is approved first (init prints its run_id).
NOTES=$(bluetape-flow init --workflow-type A --repo-root . \
  --owner-file .bluetape/handles/notes.owner --component docs \
  --at 2026-07-14T02:29:00Z | sed -E 's/.*"run_id": "([^"]*)".*/\1/')
bluetape-flow run-approve --run-id "$NOTES" \
  --owner-file .bluetape/handles/notes.owner \
  --evidence '[{"kind": "user_approval", "summary": "notes plan approved"}]' \
  --at 2026-07-14T02:30:00Z
# a receipt damaged on disk: one byte of its second line changes
sed -i '2s/plan approved/plan approveD/' ".bluetape/runs/$NOTES/receipt.jsonl"
bluetape-flow receipt-diagnose --run-id "$NOTES" > diagnosis.json
bluetape-flow recovery-run-create --run-id "$NOTES" --input diagnosis.json \
  --owner-file .bluetape/handles/notes-recovery.owner \
  --evidence '[{"kind": "user_approval", "summary": "user approved a recovery run"}]' \
  --at 2026-07-14T02:31:00Z
