# On any machine, with no state root: verify the bundle and its signed
# heads, and see the run's summary.
bluetape-flow bundle-verify run.bundle.tar --key verifier.key
