#!/usr/bin/env bash
# The main job: build bluetape-flow and drive a real run in a temporary
# state root, printing every command and its JSON answer.
# Usage: scripts/demo.sh            (keeps nothing; the temp dir is removed)
#        KEEP=1 scripts/demo.sh     (leaves the state root for inspection)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet
flow="$PWD/target/release/bluetape-flow"

work=$(mktemp -d "${TMPDIR:-/tmp}/bluetape-demo.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
state="$work/state"
mkdir -p "$work/repo"

step() {
  printf '\n$ bluetape-flow %s\n' "$*"
  "$flow" --state-root "$state" "$@"
}

step init --workflow-type A --repo-root "$work/repo" \
  --owner-file "$state/handles/main.owner" --component runtime --component cli
run_id=$(ls "$state/runs")
step verify --run-id "$run_id"
step rebuild --run-id "$run_id"
step verify --run-id "$run_id"

printf '\nThe owner token stays in its 0600 handle file; the receipt carries only its fingerprint:\n'
ls -l "$state/handles"
printf '\nA receipt cut below its acknowledged head is reported, not trusted:\n'
cp "$state/runs/$run_id/receipt.jsonl" "$work/receipt.bak"
: > "$state/runs/$run_id/receipt.jsonl"
step verify --run-id "$run_id" || echo "(exit $?: as expected)"
cp "$work/receipt.bak" "$state/runs/$run_id/receipt.jsonl"
step verify --run-id "$run_id"
[ "${KEEP:-0}" = 1 ] && printf '\nstate root kept at %s\n' "$state"
exit 0
