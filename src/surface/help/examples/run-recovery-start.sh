# The integration build broke on a shared dependency: put the run into
# recovery while it is repaired (lanes keep working in the meantime).
bluetape-flow run-recovery-start --run-id "$RUN" \
  --owner-file .bluetape/handles/main.owner \
  --evidence '[{"kind": "log", "summary": "integration build failed: lockfile conflict"}]' \
  --at 2026-07-14T01:25:00Z --reason "integration build broken"
