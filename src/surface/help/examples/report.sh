# One page a person can open in any browser: the lane timeline (hover the
# marks), components, completion gaps and the events. It is written outside
# the state root; --force replaces an earlier page.
bluetape-flow report --run-id "$RUN" --out run-report.html \
  --at 2026-07-14T01:06:00Z
bluetape-flow report --run-id "$RUN" --out run-report.html --force
