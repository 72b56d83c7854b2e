# A cancelled lane keeps its run from completing, so this happens in
# $OTHER (see the approvals example): its notes lane is dropped before it
# starts.
bluetape-flow lane-cancel --run-id "$OTHER" \
  --owner-file .bluetape/handles/other.owner --lane-id notes \
  --agent-id agent-6 --at 2026-07-14T01:00:10Z \
  --reason "not needed for a hotfix" \
  --evidence '[{"kind": "plan", "summary": "user: a hotfix needs no release notes"}]'
