# A run whose policy pins alice's SSH key: approval-statement writes the
# statement she signs, and run-approve then takes only her signature.
ssh-keygen -q -t ed25519 -N '' -C alice -f alice
BLUETAPE_INITIATED_BY=agent-1 bluetape-flow init --workflow-type A \
  --repo-root . --owner-file .bluetape/handles/keyed.owner \
  --component api \
  --approval-policy "{\"required_approver\": \"alice\",
    \"approver_key\": \"$(cat alice.pub)\"}" \
  --at 2026-07-14T01:00:04Z > keyed.json
KEYED=$(sed -E 's/.*"run_id": "([^"]*)".*/\1/' keyed.json)
bluetape-flow approval-statement --run-id "$KEYED" --out statement.txt
ssh-keygen -q -Y sign -n bluetape-flow-approval -f alice statement.txt
BLUETAPE_APPROVED_BY=alice bluetape-flow run-approve --run-id "$KEYED" \
  --owner-file .bluetape/handles/keyed.owner \
  --evidence '[{"kind": "user_approval", "summary": "alice signed the plan"}]' \
  --signature statement.txt.sig --at 2026-07-14T01:00:05Z
