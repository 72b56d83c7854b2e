# The receipt has grown since first-head.note was signed: sign the head
# now, then prove the new head extends the old one (nothing was rewritten).
bluetape-flow sign-head --run-id "$RUN" --key signer.key > signed-now.json
bluetape-flow prove-append --run-id "$RUN" --from first-head.note \
  --out append.proof
