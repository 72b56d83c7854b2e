# Create the state root .bluetape here and a run for three components.
bluetape-flow --state-root .bluetape init --workflow-type A --repo-root . \
  --owner-file .bluetape/handles/main.owner \
  --component api --component web --component docs --at 2026-07-14T00:59:00Z
# the examples of the other commands call the printed run_id $RUN
RUN=$(ls .bluetape/runs)
