# Hand the run over to a fresh session: a report of hashes bound to this
# run's owner epoch, manifest and current receipt head.
bluetape-flow resume-check --run-id "$RUN" > before.json
head=$(sed -E 's/.*"last_checksum": "([0-9a-f]+)".*/\1/' before.json)
manifest=$(sed -E 's/.*"manifest_hash": "([0-9a-f]+)".*/\1/' before.json)
epoch=$(sed -E 's/.*"owner_epoch": ([0-9]+).*/\1/' before.json)
# stand-ins for the hashes of the integrated tree, AGENTS.md, the skill
# and each target file
# (64 hex digits each; here a padded checksum of the name)
h() { printf '%064x' "$(printf '%s' "$1" | cksum | cut -d' ' -f1)"; }
cat > handoff.json <<EOF
{"canonical_sha": "$(h tree)", "agents_hash": "$(h AGENTS.md)",
 "skill_hash": "$(h SKILL.md)", "manifest_hash": "$manifest",
 "run_id": "$RUN", "owner_epoch": $epoch, "receipt_head": "$head",
 "target_hashes": {"src/api/routes.rs": "$(h routes.rs)"}}
EOF
bluetape-flow handoff-create --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner --input handoff.json \
  --at 2026-07-14T01:28:00Z
