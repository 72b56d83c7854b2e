# A signing key for the run's heads: the signer key stays in its 0600
# file; the verifier key it prints is what auditors are given.
bluetape-flow key-generate --name ci.example/bluetape --out signer.key \
  > key.json
sed -E 's/.*"verifier_key": "([^"]*)".*/\1/' key.json > verifier.key
