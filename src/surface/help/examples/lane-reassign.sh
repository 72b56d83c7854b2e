# Replace the interrupted docs lane by docs-2: a new agent resumes from
# the checkpoint recovered from agent-3's notes, in the same write scope.
cat > reassign.json <<'EOF'
{"lane_id": "docs", "replacement_lane_id": "docs-2",
 "replacement_agent_id": "agent-4", "decided_at": "2026-07-14T01:11:00Z",
 "replacement_assignment": "Resume the docs from checkpoint 2",
 "replacement_write_scope": ["docs"],
 "replacement_startup_ack_deadline": "2026-07-14T01:11:30Z",
 "replacement_command_deadline": "2026-07-14T01:30:00Z"}
EOF
bluetape-flow lane-reassign --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner \
  --input reassign.json \
  --evidence '[{"kind": "recovery", "summary": "checkpoint 2 recovered from agent-3 notes"}]'
# docs-2 then starts like any lane: spawned, then acknowledged.
bluetape-flow lane-start --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner --lane-id docs-2 \
  --agent-id agent-4 --at 2026-07-14T01:11:05Z \
  --evidence '[{"kind": "lifecycle", "summary": "spawned agent-4 for the docs-2 lane"}]'
bluetape-flow startup-ack --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner --lane-id docs-2 \
  --agent-id agent-4 --at 2026-07-14T01:11:10Z \
  --evidence '[{"kind": "lifecycle", "summary": "agent-4 acknowledged the docs-2 lane"}]'
