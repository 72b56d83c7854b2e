# Supersede a run whose receipt is damaged: a new run takes over with a
# new owner handle, and the damaged receipt is copied to quarantine as is.
# Here the receipt of $DROPPED (see the run-cancel example) is damaged on
# disk: one byte of its second line changes.
sed -i '2s/withdrew/withdreW/' ".bluetape/runs/$DROPPED/receipt.jsonl"
bluetape-flow receipt-diagnose --run-id "$DROPPED" > diagnosis.json
bluetape-flow recovery-run-create --run-id "$DROPPED" --input diagnosis.json \
  --owner-file .bluetape/handles/dropped-recovery.owner \
  --evidence '[{"kind": "user_approval", "summary": "user approved a recovery run"}]' \
  --at 2026-07-14T02:31:00Z
