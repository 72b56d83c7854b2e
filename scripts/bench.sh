#!/usr/bin/env bash
# Per-command cost against receipt length, ours and (optionally) the Python
# reference's, measured in one run on this machine. Reports ratios only.
#
#   scripts/bench.sh                       ours only (does the cost grow?)
#   REF=/path/to/bluetape-flow.py scripts/bench.sh   also the reference
#
# Method: one run is grown to SMALL and to LARGE events with our tool
# (run-recovery-start / run-recovery-finish alternating); then each tool
# performs ROUNDS more alternations on a copy of each, and `verify` once.
set -euo pipefail
cd "$(dirname "$0")/.."
SMALL=${SMALL:-100}
LARGE=${LARGE:-4000}
ROUNDS=${ROUNDS:-20}
cargo build --release --locked --quiet
ours="$PWD/target/release/bluetape-flow"
work=$(mktemp -d "${TMPDIR:-/tmp}/bluetape-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo '[{"kind":"bench","summary":"benchmark step"}]' > "$work/ev.json"

grow() { # state_dir target_events
  local state=$1 target=$2
  mkdir -p "$work/repo"
  "$ours" --state-root "$state" init --workflow-type A --repo-root "$work/repo" \
    --owner-file "$state/handles/main.owner" --component runtime > /dev/null
  local run; run=$(ls "$state/runs")
  local args=(--run-id "$run" --owner-file "$state/handles/main.owner" --evidence "$work/ev.json")
  "$ours" --state-root "$state" run-approve "${args[@]}" > /dev/null
  "$ours" --state-root "$state" run-start "${args[@]}" > /dev/null
  local n=3
  while [ "$n" -lt "$target" ]; do
    "$ours" --state-root "$state" run-recovery-start "${args[@]}" --reason bench > /dev/null
    "$ours" --state-root "$state" run-recovery-finish "${args[@]}" > /dev/null
    n=$((n + 2))
  done
  echo "$run"
}

now() { date +%s%N; }

measure() { # label tool... -- state  (prints ms per mutation and verify ms)
  local state=$1; shift
  local run; run=$(ls "$state/runs")
  local args=(--run-id "$run" --owner-file "$state/handles/main.owner" --evidence "$work/ev.json")
  local start end
  start=$(now)
  for _ in $(seq "$ROUNDS"); do
    "$@" --state-root "$state" run-recovery-start "${args[@]}" --reason bench > /dev/null
    "$@" --state-root "$state" run-recovery-finish "${args[@]}" > /dev/null
  done
  end=$(now)
  local per=$(( (end - start) / (2 * ROUNDS) / 1000 ))
  start=$(now)
  "$@" --state-root "$state" verify --run-id "$run" > /dev/null
  end=$(now)
  echo "$per $(( (end - start) / 1000 ))"
}

echo "growing runs to $SMALL and $LARGE events..."
grow "$work/small" "$SMALL" > /dev/null
grow "$work/large" "$LARGE" > /dev/null
cp -a "$work/small" "$work/small-ref"; cp -a "$work/large" "$work/large-ref"

read -r o_small o_small_v < <(measure "$work/small" "$ours")
read -r o_large o_large_v < <(measure "$work/large" "$ours")
printf '\n%-34s %12s %12s %8s\n' "per command (microseconds)" "$SMALL ev" "$LARGE ev" "growth"
printf '%-34s %12d %12d %7.2fx\n' "ours: mutation" "$o_small" "$o_large" "$(echo "$o_large / $o_small" | bc -l)"
printf '%-34s %12d %12d %7.2fx\n' "ours: verify (full, by design)" "$o_small_v" "$o_large_v" "$(echo "$o_large_v / $o_small_v" | bc -l)"
if [ -n "${REF:-}" ]; then
  read -r r_small r_small_v < <(measure "$work/small-ref" python3 "$REF")
  read -r r_large r_large_v < <(measure "$work/large-ref" python3 "$REF")
  printf '%-34s %12d %12d %7.2fx\n' "reference: mutation" "$r_small" "$r_large" "$(echo "$r_large / $r_small" | bc -l)"
  printf '%-34s %12d %12d %7.2fx\n' "reference: verify" "$r_small_v" "$r_large_v" "$(echo "$r_large_v / $r_small_v" | bc -l)"
  printf '\nreference / ours, mutation: %.1fx at %d events, %.1fx at %d events\n' \
    "$(echo "$r_small / $o_small" | bc -l)" "$SMALL" "$(echo "$r_large / $o_large" | bc -l)" "$LARGE"
  printf 'reference / ours, verify:   %.1fx at %d events, %.1fx at %d events\n' \
    "$(echo "$r_small_v / $o_small_v" | bc -l)" "$SMALL" "$(echo "$r_large_v / $o_large_v" | bc -l)" "$LARGE"
  # Both tools must still agree on the receipts they extended together.
  "$ours" --state-root "$work/large-ref" verify --run-id "$(ls "$work/large-ref/runs")" > /dev/null && echo "ours verifies the receipt the reference extended"
fi
