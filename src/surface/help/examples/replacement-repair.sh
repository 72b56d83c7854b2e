#! fixture 10-replacement-incomplete
# A crash left lane build reserved for build-2, but build-2 was never
# created (resume-check lists build under incomplete_replacements).
# Recreate build-2 from the reservation: the evidence proves the
# checkpoint by its digest (evidence-digest of the checkpoint evidence
# lane-reassign was given).
bluetape-flow resume-check --run-id "$RUN"
sum=$(bluetape-flow evidence-digest \
  --evidence '[{"kind":"recovery","summary":"checkpoint 3 recovered from agent-1 notes"}]' |
  sed -E 's/.*"digest": "([0-9a-f]+)".*/\1/')
bluetape-flow replacement-repair --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner --lane-id build \
  --replacement-lane-id build-2 --at 2026-07-14T01:12:00Z \
  --evidence "[{\"kind\": \"recovery\",
    \"summary\": \"checkpoint digest re-verified\",
    \"checksum\": \"$sum\"}]"
