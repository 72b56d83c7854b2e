# run.json and the lane caches are only caches: rewrite them from the
# verified receipt.
bluetape-flow rebuild --run-id "$RUN"
