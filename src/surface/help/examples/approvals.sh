# Show who may approve a run. A second run, $OTHER, gets a frozen policy:
# only alice may approve it. (The lane-cancel, lane-block and run-block
# examples use $OTHER, so the main run $RUN can still complete.)
OTHER=$(bluetape-flow init --workflow-type A --repo-root . \
  --owner-file .bluetape/handles/other.owner --component web \
  --approval-policy '{"required_approver": "alice"}' \
  --at 2026-07-14T00:59:30Z | sed -E 's/.*"run_id": "([^"]*)".*/\1/')
bluetape-flow approvals --run-id "$OTHER" --format table
