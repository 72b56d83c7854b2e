# Where does every run stand, and what is the safe next step for each lane
# of the main run at 01:06? (A table on a terminal; --format json here.)
bluetape-flow status --format json
bluetape-flow status --run-id "$RUN" --at 2026-07-14T01:06:00Z --format table
