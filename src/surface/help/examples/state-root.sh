# Show the state root the commands use: found by discovery, in the nearest
# directory (here, or above --start) that holds .bluetape/config.json.
bluetape-flow state-root
bluetape-flow state-root --start src/api
