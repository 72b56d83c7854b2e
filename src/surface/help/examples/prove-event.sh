# Prove that event 1 (run_created) is in the newest signed head, and keep
# the event line with the proof for someone who has no state root.
bluetape-flow prove-event --run-id "$RUN" --sequence 1 --out event-1.proof
head -n 1 ".bluetape/runs/$RUN/receipt.jsonl" > event-1.jsonl
