#!/usr/bin/env bash
# Per-command cost against receipt length, measured on this machine; see
# scripts/bench.py for the workload. Writes docs/performance.md.
#
#   scripts/bench.sh                                         ours only
#   BENCH_OTHER="python3 path/to/bluetape-flow.py" scripts/bench.sh
#                                  also the other implementation, same run
#   BENCH_SIZES="100 1000" BENCH_SAMPLES=11 scripts/bench.sh  a quick look
#   BENCH_ONLY=bundles BENCH_SIZES="100 100000" scripts/bench.sh
#                              the bundle group alone (contracts/bundle.md:
#                              bundle-verify, publish):
#                              prints its section and targets, writes nothing
#   scripts/bench.sh mcp       the MCP server's cost (scripts/bench_mcp.py;
#                              prints a section, writes nothing)
#
# The series of "Mutations at the floor" (docs/performance.md) are in every
# full run, and each alone (or several, comma-separated) with BENCH_ONLY;
# like bundles, a BENCH_ONLY run prints its sections and targets and writes
# nothing:
#   BENCH_ONLY=breaches   the breach-heavy series: runs whose every heartbeat
#                         repeats the previous evidence (the reference writes
#                         them, our replay records a liveness_evidence_reused
#                         breach each; grown by bench_grow --reuse-evidence),
#                         heartbeat, check-result, the queries, peak RSS
#   BENCH_ONLY=floor      the floor (bluetape-flow --version plus one fsynced
#                         1.5 KB append by examples/bench_floor.rs) and the
#                         heartbeat median / floor of both series, same run
#   BENCH_ONLY=syscalls   system calls per command (strace -f -c; totals,
#                         opens, fsyncs, renames, madvise) at the smallest and
#                         largest size; fails without strace unless
#                         BENCH_STRACE=0, which leaves them out and says so
#   BENCH_ONLY=otel       otel-export --out: time and peak RSS per size
#   BENCH_REFERENCE="python3 path/to/bluetape-flow.py" (or BENCH_OTHER)
#                         also checks that the reference verifies the grown
#                         breach-heavy run at the smallest size
# Every full run ends with "Targets (mutations at the floor)": each of
# those targets met or not from that run's figures.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet --bin bluetape-flow --example bench_grow \
  --example bench_floor
[ "${1:-}" = mcp ] && exec python3 scripts/bench_mcp.py
exec python3 scripts/bench.py
