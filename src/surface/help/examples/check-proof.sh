# Offline, with no state root: check both proofs against the verifier key.
bluetape-flow check-proof --proof event-1.proof --event event-1.jsonl \
  --key verifier.key
bluetape-flow check-proof --append append.proof --key verifier.key
