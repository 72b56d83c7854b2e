# Sign the run's current head (a C2SP checkpoint stored in the run), and
# keep a copy of the note elsewhere: verify --head catches a cut tail with
# it, even after the files in the state root were deleted.
bluetape-flow sign-head --run-id "$RUN" --key signer.key > signed.json
note=$(sed -E 's/.*"path": "([^"]*)".*/\1/' signed.json)
cp ".bluetape/$note" first-head.note
bluetape-flow verify --run-id "$RUN" --head first-head.note --key verifier.key
