#!/usr/bin/env bash
# Per-command cost against receipt length, measured on this machine; see
# scripts/bench.py for the workload. Writes docs/performance.md.
#
#   scripts/bench.sh                                         ours only
#   BENCH_OTHER="python3 path/to/bluetape-flow.py" scripts/bench.sh
#                                  also the other implementation, same run
#   BENCH_SIZES="100 1000" BENCH_SAMPLES=11 scripts/bench.sh  a quick look
#   BENCH_ONLY=bundles BENCH_SIZES="100 100000" scripts/bench.sh
#                              issue 20's group alone (bundle-verify, publish):
#                              prints its section and targets, writes nothing
#   scripts/bench.sh mcp       the MCP server's cost (scripts/bench_mcp.py;
#                              prints a section, writes nothing)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet --bin bluetape-flow --example bench_grow
[ "${1:-}" = mcp ] && exec python3 scripts/bench_mcp.py
exec python3 scripts/bench.py
