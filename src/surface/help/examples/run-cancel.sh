# Cancel a run whose plan the user withdrew before approving it: a new
# run, $DROPPED (init prints its run_id), is cancelled while planned.
DROPPED=$(bluetape-flow init --workflow-type A --repo-root . \
  --owner-file .bluetape/handles/dropped.owner --component web \
  --at 2026-07-14T02:19:00Z | sed -E 's/.*"run_id": "([^"]*)".*/\1/')
bluetape-flow run-cancel --run-id "$DROPPED" \
  --owner-file .bluetape/handles/dropped.owner \
  --evidence '[{"kind": "user_approval", "summary": "user withdrew the redesign plan"}]' \
  --at 2026-07-14T02:20:00Z --reason "plan withdrawn"
