# After a separately approved live apply, bind its report to the
# completed run (owner epoch 2 since resume; session-2.owner).
bluetape-flow resume-check --run-id "$RUN" > done.json
head=$(sed -E 's/.*"last_checksum": "([0-9a-f]+)".*/\1/' done.json)
manifest=$(sed -E 's/.*"manifest_hash": "([0-9a-f]+)".*/\1/' done.json)
# stand-ins for the real hashes (tree, AGENTS.md, skill, files, outputs):
# h, the padded checksum of a name, of the handoff-create example
cat > live.json <<EOF
{"canonical_sha": "$(h tree)", "agents_hash": "$(h AGENTS.md)",
 "skill_hash": "$(h SKILL.md)", "manifest_hash": "$manifest",
 "run_id": "$RUN", "owner_epoch": 2, "receipt_head": "$head",
 "target_hashes": {"src/api/routes.rs": "$(h routes.rs)"},
 "command_ids": ["deploy-diff", "deploy-apply"],
 "timestamps": ["2026-07-14T01:40:00Z", "2026-07-14T01:41:00Z"],
 "exit_status": 0, "source_hash": "$(h source)",
 "rendered_hash": "$(h rendered)", "live_hash": "$(h live)",
 "evidence_refs": [{"kind": "command", "summary": "live apply verified"}]}
EOF
bluetape-flow live-report-create --run-id "$RUN" \
  --owner-file .bluetape/handles/session-2.owner --input live.json \
  --at 2026-07-14T01:42:00Z
