# A signed in-toto statement that the run completed, for a CI gate.
bluetape-flow attest --run-id "$RUN" --key signer.key --out run.intoto.json
