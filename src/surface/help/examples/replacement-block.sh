#! fixture 10-replacement-incomplete
# A crash left lane build reserved for build-2, which was never created
# (resume-check lists build under incomplete_replacements). When it cannot
# be recreated safely (here: the checkpoint is no longer trusted), block
# the replacement instead of repairing it: build becomes blocked.
bluetape-flow resume-check --run-id "$RUN"
bluetape-flow replacement-block --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner --lane-id build \
  --replacement-lane-id build-2 --at 2026-07-14T01:13:00Z \
  --evidence '[{"kind": "recovery", "summary": "checkpoint 3 is no longer trusted"}]'
