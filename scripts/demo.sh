#!/usr/bin/env bash
# The main job: build bluetape-flow and drive a realistic multi-lane run in a
# temporary state root, printing every command and its JSON answer.
#
# Three lanes work in parallel; `parser` goes silent, is suspected, probed,
# interrupted and replaced by `parser-2` from its checkpoint; `cli` and
# `docs` complete. The topology is registered; completion is blocked until
# checks (one fails, then passes), component evidence and the resolution of
# a failed review lane by its re-review are recorded; then the run
# completes. Every step gives --at, so the run reads forward in log and
# report; every digest comes from the tool (liveness-check --explain,
# evidence-digest).
#
#   scripts/demo.sh           (the temporary state root is removed)
#   KEEP=1 scripts/demo.sh    (leaves it for inspection)
#   FLOW=bin KEEP=1 scripts/demo.sh  (drives the binary `bin`, builds nothing)
set -euo pipefail
cd "$(dirname "$0")/.."
# FLOW=path/to/bluetape-flow drives that binary instead of building one
# (the bundle tests export the demo's runs with the binary under test).
if [ -n "${FLOW:-}" ]; then
  flow="$FLOW"
else
  cargo build --release --locked --quiet
  flow="${CARGO_TARGET_DIR:-$PWD/target}/release/bluetape-flow"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/bluetape-demo.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
state="$work/state"
repo="$work/repo"
mkdir -p "$repo/src/parser" "$repo/src/cli" "$repo/docs" "$work/in"
owner="$state/handles/main.owner"

say() { printf '\n# %s\n' "$*"; }
step() {
  printf '$ bluetape-flow %s\n' "$*" | sed "s#$work#\$WORK#g"
  "$flow" --state-root "$state" "$@" | sed "s#$work#\$WORK#g"
}
# json NAME 'CONTENT': write an input file, print its path.
json() { printf '%s\n' "$2" > "$work/in/$1.json"; echo "$work/in/$1.json"; }
ev() { json "ev-$1" "[{\"kind\":\"$2\",\"summary\":\"$3\"}]"; }

say "A run is created, approved and started"
step init --workflow-type A --repo-root "$repo" --owner-file "$owner" \
  --component parser --component cli --component docs --at 2026-07-14T00:59:00Z
run=$(ls "$state/runs")
R=(--run-id "$run" --owner-file "$owner")
step run-approve "${R[@]}" --evidence "$(ev approve user_approval 'plan approved by the user')" --at 2026-07-14T01:00:00Z
step run-start "${R[@]}" --evidence "$(ev start plan 'run started')" --at 2026-07-14T01:00:01Z

say "Three lanes, each with its own agent and write scope"
lane() { # id agent scope
  json "lane-$1" "{\"lane_id\":\"$1\",\"agent_id\":\"$2\",\"assignment\":\"Work on $1\",\"write_scope\":[\"$3\"],\"fallback\":\"main session\",\"observed_at\":\"2026-07-14T01:00:02Z\",\"startup_ack_deadline\":\"2026-07-14T01:00:30Z\",\"command_deadline\":\"2026-07-14T01:10:00Z\"}"
}
for spec in "parser agent-1 src/parser" "cli agent-2 src/cli" "docs agent-3 docs"; do
  set -- $spec
  step lane-create "${R[@]}" --input "$(lane "$1" "$2" "$3")" --evidence "$(ev "assign-$1" plan "assign $1")"
done
for spec in "parser agent-1" "cli agent-2" "docs agent-3"; do
  set -- $spec
  step lane-start "${R[@]}" --lane-id "$1" --agent-id "$2" --at 2026-07-14T01:00:03Z --evidence "$(ev "spawn-$1" lifecycle "spawned $2")"
  step startup-ack "${R[@]}" --lane-id "$1" --agent-id "$2" --at 2026-07-14T01:00:04Z --evidence "$(ev "ack-$1" lifecycle "$2 acknowledged startup")"
done

say "Liveness: a heartbeat renews a silence lease (it is never completion evidence)"
step heartbeat "${R[@]}" --evidence "$(json hb-ev '[{"kind":"log","summary":"parser tests compiling","exit_status":0}]')" \
  --input "$(json hb '{"lane_id":"parser","agent_id":"agent-1","observed_at":"2026-07-14T01:00:05Z","silence_lease_deadline":"2026-07-14T01:05:00Z","reason":"still compiling"}')"

# --- hand-over to a new owner (reference-coordinator §11) ---------------------
say "The session hands over: it binds a handoff report to the receipt head"
field() { sed -E "s/.*\"$1\": \"?([^\",}]*)\"?[,}].*/\1/"; }
head=$("$flow" --state-root "$state" verify --run-id "$run" | field checksum)
manifest=$("$flow" --state-root "$state" resume-check --run-id "$run" | field manifest_hash)
step handoff-create "${R[@]}" --input "$(json handoff "{\"canonical_sha\":\"$(printf a%.0s {1..64})\",\"agents_hash\":\"$(printf b%.0s {1..64})\",\"skill_hash\":\"$(printf c%.0s {1..64})\",\"manifest_hash\":\"$manifest\",\"run_id\":\"$run\",\"owner_epoch\":1,\"receipt_head\":\"$head\",\"target_hashes\":{\"src/parser/lib.rs\":\"$(printf d%.0s {1..64})\"}}")" --at 2026-07-14T01:00:20Z

say "A fresh session takes over: resume-check, then resume to a new 0600 handle (epoch 2)"
step resume-check --run-id "$run"
cp "$owner" "$state/handles/old-copy.owner" && chmod 600 "$state/handles/old-copy.owner"
step resume "${R[@]}" --new-owner-file "$state/handles/session-2.owner" \
  --evidence "$(ev handover user_approval 'user approved handing the run to session 2')" --at 2026-07-14T01:00:30Z
owner="$state/handles/session-2.owner"
R=(--run-id "$run" --owner-file "$owner")

say "The old handle is gone, and a copy of it is fenced by the new epoch"
step run-block --run-id "$run" --owner-file "$state/handles/old-copy.owner" \
  --evidence "$(ev stale lifecycle 'a stale session tries to block the run')" --reason "stale session" \
  || echo "(refused, exit $?: as it should be)"
rm "$state/handles/old-copy.owner"
# --- end of hand-over --------------------------------------------------------

say "cli and docs finish inside their write scopes"
step lane-complete "${R[@]}" --lane-id cli --agent-id agent-2 --at 2026-07-14T01:03:00Z \
  --evidence "$(ev done-cli test 'cli tests passed')" --changed-paths "$(json changed-cli '["src/cli/main.rs"]')"
step lane-complete "${R[@]}" --lane-id docs --agent-id agent-3 --at 2026-07-14T01:04:00Z \
  --evidence "$(ev done-docs review 'docs reviewed')" --changed-paths "$(json changed-docs '["docs/guide.md"]')"

say "parser goes silent: fresh until the lease, then a suspected stall"
step liveness-check --run-id "$run" --lane-id parser --at 2026-07-14T01:04:00Z
step liveness-check --run-id "$run" --lane-id parser --at 2026-07-14T01:06:00Z
# The stall record binds the liveness decision by its checksum, which
# liveness-check --explain prints with the decision itself.
explained=$("$flow" --state-root "$state" liveness-check --run-id "$run" --lane-id parser \
  --at 2026-07-14T01:06:00Z --explain)
digest=$(printf '%s' "$explained" | sed -E 's/.*"decision_checksum": "([0-9a-f]{64})".*/\1/')
decision=$(json decision '{"action":"suspect_stall","reason":"no fresh evidence"}')
step stall-record "${R[@]}" --lane-id parser --agent-id agent-1 --at 2026-07-14T01:06:00Z --decision "$decision" \
  --reason "no fresh evidence" --evidence "$(json stall-ev "[{\"kind\":\"liveness\",\"summary\":\"liveness-check decision for parser\",\"checksum\":\"$digest\"}]")"

say "The main session probes agent-1, which does not answer; the deadlines pass"
step probe-sent "${R[@]}" --lane-id parser --agent-id agent-1 --at 2026-07-14T01:06:10Z --deadline 2026-07-14T01:07:00Z \
  --evidence "$(ev probe tool 'send_message status probe to agent-1')"
step liveness-check --run-id "$run" --lane-id parser --at 2026-07-14T01:10:30Z --command-status alive
step interrupt-result "${R[@]}" --lane-id parser --agent-id agent-1 --at 2026-07-14T01:10:30Z \
  --evidence "$(ev interrupt tool 'interrupt_agent returned interrupted')"

say "parser is replaced by parser-2 (a new agent, a narrower scope, from the checkpoint)"
step lane-reassign "${R[@]}" --evidence "$(ev checkpoint recovery 'checkpoint 3 recovered from agent-1 notes')" \
  --input "$(json reassign '{"lane_id":"parser","replacement_lane_id":"parser-2","replacement_agent_id":"agent-4","decided_at":"2026-07-14T01:11:00Z","replacement_assignment":"Resume parser from checkpoint 3","replacement_write_scope":["src/parser/grammar"],"replacement_startup_ack_deadline":"2026-07-14T01:11:30Z","replacement_command_deadline":"2026-07-14T01:30:00Z"}')"

say "A late result from the replaced agent is refused (fencing)"
step lane-complete "${R[@]}" --lane-id parser --agent-id agent-1 --at 2026-07-14T01:12:00Z \
  --evidence "$(ev late lifecycle 'late result from agent-1')" --changed-paths "$(json changed-late '["src/parser/lib.rs"]')" \
  || echo "(refused, exit $?: as it should be)"

say "parser-2 runs to completion and the lineage is closed"
step lane-start "${R[@]}" --lane-id parser-2 --agent-id agent-4 --at 2026-07-14T01:11:05Z --evidence "$(ev spawn-p2 lifecycle 'spawned agent-4')"
step startup-ack "${R[@]}" --lane-id parser-2 --agent-id agent-4 --at 2026-07-14T01:11:10Z --evidence "$(ev ack-p2 lifecycle 'agent-4 acknowledged startup')"
step lane-complete "${R[@]}" --lane-id parser-2 --agent-id agent-4 --at 2026-07-14T01:20:00Z \
  --evidence "$(ev done-p2 test 'parser tests passed')" --changed-paths "$(json changed-p2 '["src/parser/grammar/expr.rs"]')"
step replacement-close "${R[@]}" --lane-id parser --replacement-lane-id parser-2 --at 2026-07-14T01:21:00Z \
  --evidence "$(ev close lineage 'replacement parser-2 completed')"

say "Topology: the approved components, each owned by a lane that exists"
# docs is optional; parser is owned by the lane that finished it.
step topology-register "${R[@]}" --at 2026-07-14T01:21:05Z --evidence "$(ev topology plan 'component topology approved by the user')" \
  --input "$(json topology '[
  {"id":"parser","required":true,"description":"Expression parser","owner_lane":"parser-2","required_checks":["unit"],"dependencies":[],"evidence_refs":[],"coverage_state":"missing"},
  {"id":"cli","required":true,"description":"Command line front end","owner_lane":"cli","required_checks":["unit"],"dependencies":["parser"],"evidence_refs":[],"coverage_state":"missing"},
  {"id":"docs","required":false,"description":"User guide","owner_lane":"docs","required_checks":[],"dependencies":[],"evidence_refs":[],"coverage_state":"missing"}]')"

say "A review lane fails; a re-review lane (its child) is started to correct it"
review_lane() { # id agent observed parent
  json "lane-$1" "{\"lane_id\":\"$1\",\"agent_id\":\"$2\",\"assignment\":\"Review the parser against its grammar\",\"write_scope\":[],\"fallback\":\"main session\",\"observed_at\":\"$3\",\"startup_ack_deadline\":\"2026-07-14T01:45:00Z\",\"command_deadline\":\"2026-07-14T02:00:00Z\",\"parent_lane_id\":$4}"
}
step lane-create "${R[@]}" --input "$(review_lane review agent-5 2026-07-14T01:21:10Z null)" --evidence "$(ev assign-review plan 'assign review')"
step lane-start "${R[@]}" --lane-id review --agent-id agent-5 --at 2026-07-14T01:21:15Z --evidence "$(ev spawn-review lifecycle 'spawned agent-5')"
step startup-ack "${R[@]}" --lane-id review --agent-id agent-5 --at 2026-07-14T01:21:20Z --evidence "$(ev ack-review lifecycle 'agent-5 acknowledged startup')"
fail_ev=$(ev fail-review review 'review found grammar cases without tests')
step lane-fail "${R[@]}" --lane-id review --agent-id agent-5 --at 2026-07-14T01:25:00Z --reason "grammar cases untested" --evidence "$fail_ev"
step lane-create "${R[@]}" --input "$(review_lane review-2 agent-6 2026-07-14T01:25:10Z '"review"')" --evidence "$(ev assign-review-2 plan 'assign re-review')"
step lane-start "${R[@]}" --lane-id review-2 --agent-id agent-6 --at 2026-07-14T01:25:15Z --evidence "$(ev spawn-review-2 lifecycle 'spawned agent-6')"
step startup-ack "${R[@]}" --lane-id review-2 --agent-id agent-6 --at 2026-07-14T01:25:20Z --evidence "$(ev ack-review-2 lifecycle 'agent-6 acknowledged startup')"
done_ev=$(ev done-review-2 review 're-review passed: every grammar case is tested')
step lane-complete "${R[@]}" --lane-id review-2 --agent-id agent-6 --at 2026-07-14T01:30:00Z \
  --evidence "$done_ev" --changed-paths "$(json changed-review-2 '[]')"

say "The gate: completion-check lists every gap, so complete is blocked (exit 6)"
step completion-check --run-id "$run"
step complete "${R[@]}" --evidence "$(ev verify-early verification 'main session verified the build')" \
  || echo "(blocked, exit $?: as it should be)"

say "Checks: parser's unit check fails, then passes with a reason and fresh evidence"
check() { json "check-$1-$2" "{\"component_id\":\"$1\",\"check_id\":\"unit\",\"passed\":$2${3:+,\"reason\":\"$3\"}}"; }
step check-result "${R[@]}" --input "$(check parser false)" --evidence "$(json check-parser-red '[{"kind":"test","summary":"parser unit: 2 failures","exit_status":1}]')" --at 2026-07-14T01:30:10Z
step check-result "${R[@]}" --input "$(check parser true 'precedence bug fixed')" --evidence "$(json check-parser-green '[{"kind":"test","summary":"parser unit: all passed","exit_status":0}]')" --at 2026-07-14T01:30:20Z
step check-result "${R[@]}" --input "$(check cli true)" --evidence "$(json check-cli '[{"kind":"test","summary":"cli unit: all passed","exit_status":0}]')" --at 2026-07-14T01:30:30Z

say "Component evidence: a heartbeat is never completion evidence"
step component-evidence "${R[@]}" --input "$(json cover-parser '{"component_id":"parser"}')" --evidence "$work/in/hb-ev.json" \
  || echo "(refused, exit $?: as it should be)"
step component-evidence "${R[@]}" --input "$work/in/cover-parser.json" --evidence "$(ev cover-parser-ev verification 'parser verified at the integrated head')" --at 2026-07-14T01:30:50Z
step component-evidence "${R[@]}" --input "$(json cover-cli '{"component_id":"cli"}')" --evidence "$(ev cover-cli-ev verification 'cli verified at the integrated head')" --at 2026-07-14T01:30:55Z

say "The failed review stays failed; the re-review resolves it (evidence binds both lanes' evidence)"
# The digest of each lane's evidence, as evidence-digest prints it.
digest_of() { "$flow" evidence-digest --evidence "$1" | field digest; }
step lane-resolve "${R[@]}" --lane-id review --resolution-lane-id review-2 --at 2026-07-14T01:31:00Z \
  --evidence "$(json resolve "[{\"kind\":\"review\",\"summary\":\"failed review\",\"checksum\":\"$(digest_of "$fail_ev")\"},{\"kind\":\"review\",\"summary\":\"re-review\",\"checksum\":\"$(digest_of "$done_ev")\"}]")"

say "Nothing is missing but main verification: the run completes"
step completion-check --run-id "$run"
step complete "${R[@]}" --evidence "$(ev verify verification 'main session verified the integrated result')" --at 2026-07-14T01:32:00Z
step completion-check --run-id "$run"

say "An auditor replays the receipt read-only"
step verify --run-id "$run"
step resume-check --run-id "$run"
step receipt-diagnose --run-id "$run"
# --- a damaged receipt superseded by a recovery run (reference-coordinator §12) ---
say "A second, small run; then a byte of its receipt is changed on disk"
out=$("$flow" --state-root "$state" init --workflow-type A --repo-root "$repo" \
  --owner-file "$state/handles/notes.owner" --component notes --at 2026-07-14T01:59:00Z)
printf '$ bluetape-flow init ... --owner-file $WORK/state/handles/notes.owner --component notes\n%s\n' "$out" | sed "s#$work#\$WORK#g"
notes=$(printf '%s' "$out" | field run_id)
step run-approve --run-id "$notes" --owner-file "$state/handles/notes.owner" \
  --evidence "$(ev notes-approve user_approval 'notes plan approved')" --at 2026-07-14T02:00:00Z
sed -i '2s/notes plan approved/notes plan forged!/' "$state/runs/$notes/receipt.jsonl"
step verify --run-id "$notes" || echo "(refused, exit $?: the chain is broken)"

say "Diagnosis (read-only): where trust ends, and a checksum over the verdict"
"$flow" --state-root "$state" receipt-diagnose --run-id "$notes" > "$work/in/diagnosis.json"
printf '$ bluetape-flow receipt-diagnose --run-id %s\n' "$notes"
sed "s#$work#\$WORK#g" "$work/in/diagnosis.json"

say "Recovery: the damaged bytes go to quarantine, a new run starts with their provenance"
out=$("$flow" --state-root "$state" recovery-run-create --run-id "$notes" --input "$work/in/diagnosis.json" \
  --owner-file "$state/handles/notes-recovery.owner" \
  --evidence "$(ev recovery user_approval 'user approved a recovery run for notes')" --at 2026-07-14T02:01:00Z)
printf '$ bluetape-flow recovery-run-create --run-id %s ...\n%s\n' "$notes" "$out" | sed "s#$work#\$WORK#g"
recovered=$(printf '%s' "$out" | field new_run_id)
step verify --run-id "$recovered"
step resume-check --run-id "$recovered"
cmp "$state/runs/$notes/receipt.jsonl" "$state/$(printf '%s' "$out" | field quarantine_path)" \
  && echo "(the quarantined copy is byte-identical; the damaged receipt was not touched)"
# --- end of recovery ---------------------------------------------------------
# --- views (views.md) ---------------------------------------------------------
say "Where every run stands (status), and the main run in full"
step status --at 2026-07-14T02:00:00Z --format table --color never
step status --run-id "$run" --at 2026-07-14T02:00:00Z --format table --color never
say "The last events of the main run (log), then one page about it (report)"
step log --run-id "$run" --tail 5 --format table
page="${DEMO_REPORT:-${CARGO_TARGET_DIR:-$PWD/target}/demo-report.html}"
step report --run-id "$run" --out "$page" --at 2026-07-14T02:00:00Z --force
printf '(open it in a browser: xdg-open %s)\n' "$page"
[ "${KEEP:-0}" = 1 ] && printf '\nstate root kept at %s\n' "$state"
exit 0
