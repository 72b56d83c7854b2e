//! A generated-sequence property test over the pure core (architecture.md
//! §2, contracts/receipt.md "Checkpoint"): random runs of commands are
//! decided, sealed and replayed without a state root, and at every step
//!
//! - what a decision proposes seals into a line the streaming verifier
//!   accepts (canonical, chained, its contract met) and our replay applies;
//! - our own write never makes the run worse: replay records no breach for it
//!   (trust-model §2 promise 3);
//! - the state a mutation restores from the last checkpoint (public state,
//!   our part, the digest table) decides every command exactly as the full
//!   replay does, and equals it after the event is applied.
//!
//! The run starts from the reference's `01-init-only` fixture (its manifest
//! snapshot and `run_created` line), so the contract is the shipped one.

use crate::receipt::json_ref::ObjectRef;
use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::mutate::seal_intents;
use crate::coordinator::decide::{FlowError, Intent, Policy};
use crate::coordinator::lane_commands::{
    LaneCommand, LaneTransition, decide_lane_create, decide_lane_transition, precheck_lane_create,
};
use crate::coordinator::liveness::{decide_heartbeat, precheck_heartbeat};
use crate::coordinator::run_commands::{RunCommand, decide_run_transition};
use crate::coordinator::state::EarlierDigests;
use crate::coordinator::topology::{
    decide_check_result, decide_component_evidence, decide_register, precheck_check_result,
};
use crate::coordinator::{CoordinatorState, OnRefusal, ReplayPolicy, RunOrigin};
use crate::receipt::manifest::{RunManifest, load_run_manifest};
use crate::receipt::verify::{ChainPosition, ChainVerifier};

const LANES: [&str; 3] = ["build", "docs", "fix"];
const AGENTS: [&str; 2] = ["agent-1", "agent-2"];
/// The components the fixture's `init` approved.
const COMPONENTS: [&str; 2] = ["cli", "runtime"];
const CHECK: &str = "unit";

/// Which evidence a command carries.
#[derive(Debug, Clone, Copy)]
enum Evidence {
    /// Never used before in the run.
    Fresh,
    /// The evidence of an earlier command, by its place in the run's list.
    Earlier(usize),
}

#[derive(Debug, Clone)]
enum Op {
    Run(RunCommand),
    LaneCreate {
        lane: usize,
        agent: usize,
    },
    Lane {
        command: LaneCommand,
        lane: usize,
        agent: usize,
        evidence: Evidence,
    },
    Heartbeat {
        lane: usize,
        agent: usize,
        evidence: Evidence,
    },
    Register {
        owners: [usize; 2],
        required: [bool; 2],
    },
    Check {
        component: usize,
        passed: bool,
        evidence: Evidence,
    },
    ComponentEvidence {
        component: usize,
        evidence: Evidence,
    },
    Complete {
        evidence: Evidence,
    },
}

fn evidence() -> impl Strategy<Value = Evidence> {
    prop_oneof![
        3 => Just(Evidence::Fresh),
        1 => (0usize..64).prop_map(Evidence::Earlier),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    // The prelude's lane most, the last one least.
    let lane = prop_oneof![3 => Just(0usize), 2 => Just(1usize), 1 => Just(2usize)];
    // Mostly the agent the lanes were made for, sometimes another one.
    let agent = prop_oneof![4 => Just(0usize), 1 => Just(1usize)];
    // Weighted so that lanes live long enough to reach their later steps.
    let lane_command = prop_oneof![
        3 => Just(LaneCommand::Start),
        3 => Just(LaneCommand::StartupAck),
        2 => Just(LaneCommand::Complete),
        1 => Just(LaneCommand::Fail),
        1 => Just(LaneCommand::Block),
        1 => Just(LaneCommand::Cancel),
    ];
    prop_oneof![
        1 => prop_oneof![
            4 => Just(RunCommand::Approve),
            4 => Just(RunCommand::Start),
            1 => Just(RunCommand::Block),
            1 => Just(RunCommand::Fail),
        ]
        .prop_map(Op::Run),
        2 => (lane.clone(), agent.clone()).prop_map(|(lane, agent)| Op::LaneCreate { lane, agent }),
        6 => (lane_command, lane.clone(), agent.clone(), evidence()).prop_map(
            |(command, lane, agent, evidence)| Op::Lane { command, lane, agent, evidence }
        ),
        4 => (lane.clone(), agent, evidence())
            .prop_map(|(lane, agent, evidence)| Op::Heartbeat { lane, agent, evidence }),
        1 => ([lane.clone(), lane], [any::<bool>(), any::<bool>()])
            .prop_map(|(owners, required)| Op::Register { owners, required }),
        2 => (0..COMPONENTS.len(), any::<bool>(), evidence())
            .prop_map(|(component, passed, evidence)| Op::Check { component, passed, evidence }),
        2 => (0..COMPONENTS.len(), evidence())
            .prop_map(|(component, evidence)| Op::ComponentEvidence { component, evidence }),
        1 => evidence().prop_map(|evidence| Op::Complete { evidence }),
    ]
}

/// The digest table a checkpoint stands on, as the store's table answers.
#[derive(Debug)]
struct Table(Vec<(String, String)>);

impl EarlierDigests for Table {
    fn contains(&self, lane_id: &str, digest: &str) -> bool {
        self.0.iter().any(|(l, d)| l == lane_id && d == digest)
    }
}

/// What a checkpoint keeps of a state (contracts/receipt.md "Checkpoint").
struct Checkpoint {
    public: Value,
    ours: Value,
    counts: BTreeMap<String, usize>,
    table: Arc<Table>,
}

impl Checkpoint {
    /// Saved as a mutation saves it: the table grows by the lanes' own
    /// digests (all of them after a full replay, the new ones otherwise).
    fn save(state: &CoordinatorState, table: &[(String, String)]) -> Checkpoint {
        let mut table = table.to_vec();
        table.extend(state.own_liveness_digests());
        Checkpoint {
            public: state.public_json_with_digests(false),
            ours: state.ours_json(),
            counts: state.liveness_digest_counts(),
            table: Arc::new(Table(table)),
        }
    }

    fn restore(&self) -> CoordinatorState {
        let mut state = CoordinatorState::from_public_json(&self.public).expect("public state");
        state.restore_ours(&self.ours).expect("our part");
        state
            .attach_earlier_digests(self.table.clone(), &self.counts)
            .expect("digest counts");
        state
    }
}

/// The facts of a state that every command may rest on.
fn facts(state: &CoordinatorState) -> (Value, Value, BTreeMap<String, usize>) {
    (
        state.public_json_with_digests(false),
        state.ours_json(),
        state.liveness_digest_counts(),
    )
}

struct Bed {
    manifest: RunManifest,
    run_id: String,
    genesis: Vec<u8>,
}

fn bed() -> Bed {
    let runs = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/reference-runs/01-init-only/state/runs");
    let run = std::fs::read_dir(&runs)
        .expect("fixture run")
        .flatten()
        .next()
        .expect("one run")
        .path();
    let manifest = load_run_manifest(&std::fs::read(run.join("manifest.json")).unwrap()).unwrap();
    let receipt = std::fs::read(run.join("receipt.jsonl")).unwrap();
    Bed {
        manifest,
        run_id: run.file_name().unwrap().to_string_lossy().into_owned(),
        genesis: receipt,
    }
}

/// One step's inputs, made from the op and the run so far.
struct Walk {
    used: Vec<Value>,
    fresh: u64,
    second: u64,
}

impl Walk {
    fn evidence(&mut self, choice: Evidence, kind: &str) -> Value {
        match choice {
            Evidence::Earlier(i) if !self.used.is_empty() => self.used[i % self.used.len()].clone(),
            _ => {
                self.fresh += 1;
                json!([{"kind": kind, "summary": format!("{kind} note {}", self.fresh)}])
            }
        }
    }

    /// The next second of the run's clock.
    fn tick(&mut self) -> i64 {
        self.second += 1;
        self.second as i64
    }
}

/// Second `second` of the run's clock, as a UTC timestamp.
fn stamp(second: i64) -> String {
    chrono::DateTime::from_timestamp(1_784_000_000 + second, 0)
        .unwrap()
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The decision `op` gets on `state` at second `second` (with the
/// evidence it carries).
fn decide(
    op: &Op,
    state: &CoordinatorState,
    policy: &Policy,
    evidence: &Value,
    second: i64,
) -> Result<Vec<Intent>, FlowError> {
    let at = &stamp(second);
    let later = |s: i64| stamp(second + s);
    match *op {
        Op::Run(command) => {
            let reason = command.takes_reason().then_some("the test says so");
            decide_run_transition(state, command, at, evidence, reason)
        }
        Op::LaneCreate { lane, agent } => {
            let input = json!({
                "lane_id": LANES[lane], "agent_id": AGENTS[agent],
                "assignment": "generated lane", "write_scope": ["src"],
                "fallback": "main session", "observed_at": at,
                "startup_ack_deadline": later(300), "command_deadline": later(3600),
            });
            let request = precheck_lane_create(&input, evidence, |scopes| {
                Ok(scopes
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect())
            })?;
            decide_lane_create(state, policy, &request, evidence)
        }
        Op::Lane {
            command,
            lane,
            agent,
            ..
        } => {
            let reason = command.takes_reason().then_some("the test says so");
            // A completion names what it changed, inside the scope.
            let changed = json!(["src/lib.rs"]);
            let completes = command == LaneCommand::Complete;
            decide_lane_transition(
                state,
                &LaneTransition {
                    command,
                    lane_id: LANES[lane],
                    agent_id: AGENTS[agent],
                    at,
                    evidence,
                    reason,
                    changed_paths: completes.then_some(&changed),
                },
                |_| Ok(vec!["src/lib.rs".to_string()]),
            )
        }
        Op::Heartbeat { lane, agent, .. } => {
            let heartbeat = precheck_heartbeat(&json!({
                "lane_id": LANES[lane], "agent_id": AGENTS[agent], "observed_at": at,
                "silence_lease_deadline": later(120), "reason": "still working",
            }))?;
            decide_heartbeat(state, policy, &heartbeat, evidence)
        }
        Op::Register { owners, required } => {
            let components: Vec<Value> = COMPONENTS
                .iter()
                .zip(owners.iter().zip(required))
                .map(|(id, (owner, required))| {
                    json!({
                        "id": id, "required": required, "description": format!("the {id}"),
                        "owner_lane": LANES[*owner], "required_checks": [CHECK],
                        "dependencies": [], "evidence_refs": [], "coverage_state": "missing",
                    })
                })
                .collect();
            decide_register(state, policy, &Value::Array(components), evidence)
        }
        Op::Check {
            component, passed, ..
        } => {
            let input = json!({
                "component_id": COMPONENTS[component], "check_id": CHECK, "passed": passed,
                "reason": "generated",
            });
            let request = precheck_check_result(&input, evidence)?;
            decide_check_result(state, &request, evidence)
        }
        Op::ComponentEvidence { component, .. } => {
            decide_component_evidence(state, COMPONENTS[component], evidence)
        }
        Op::Complete { .. } => crate::coordinator::completion::decide_complete(state, evidence),
    }
}

fn evidence_of(op: &Op) -> (Evidence, &'static str) {
    match *op {
        Op::Lane { evidence, .. } => (evidence, "log"),
        Op::Heartbeat { evidence, .. } => (evidence, "log"),
        Op::Check { evidence, .. } => (evidence, "test"),
        Op::ComponentEvidence { evidence, .. } | Op::Complete { evidence } => (evidence, "test"),
        _ => (Evidence::Fresh, "note"),
    }
}

impl Op {
    /// The command's name (what the tally counts).
    fn name(&self) -> &'static str {
        match self {
            Op::Run(RunCommand::Approve) => "run-approve",
            Op::Run(RunCommand::Start) => "run-start",
            Op::Run(_) => "run-fail/block",
            Op::LaneCreate { .. } => "lane-create",
            Op::Lane { command, .. } => match command {
                LaneCommand::Start => "lane-start",
                LaneCommand::StartupAck => "startup-ack",
                LaneCommand::Complete => "lane-complete",
                _ => "lane-fail/block/cancel",
            },
            Op::Heartbeat { .. } => "heartbeat",
            Op::Register { .. } => "topology-register",
            Op::Check { .. } => "check-result",
            Op::ComponentEvidence { .. } => "component-evidence",
            Op::Complete { .. } => "complete",
        }
    }
}

/// Runs `ops`; returns the names of the commands that were committed.
fn run_sequence(bed: &Bed, ops: &[Op]) -> Vec<&'static str> {
    let contract = &bed.manifest.contract;
    let policy = Policy::from_contract(&contract.contract, &contract.limits);
    let replay_policy = ReplayPolicy::from_contract(&contract.contract);
    let origin = RunOrigin::of_snapshot(bed.manifest.run.as_ref()).expect("origin");
    let owner = bed.manifest.owner_fingerprint().expect("owner").to_string();
    let epoch = bed.manifest.initial_owner_epoch();

    // The chain as a verifier reads it, and the state a full replay gives.
    let mut verifier = ChainVerifier::new(
        &bed.manifest,
        &bed.run_id,
        ChainPosition::genesis(&bed.manifest),
    );
    let mut replayed = CoordinatorState::new(&origin);
    let first = verifier.check_line(&bed.genesis).expect("genesis verifies");
    replayed
        .apply_event(&first, &replay_policy)
        .expect("genesis replays");
    // The same replay without an undo journal (what a verdict uses).
    let mut unjournaled = replayed.clone();
    let mut checkpoint = Checkpoint::save(&replayed, &[]);

    let mut walk = Walk {
        used: Vec::new(),
        fresh: 0,
        second: 0,
    };
    let mut committed = Vec::new();
    for (step, op) in ops.iter().enumerate() {
        let (choice, kind) = evidence_of(op);
        let evidence = walk.evidence(choice, kind);
        let second = walk.tick();
        let at = stamp(second);
        // A mutation decides on the state restored from the checkpoint; it
        // must decide exactly as on the full replay.
        let mut restored = checkpoint.restore();
        assert_eq!(facts(&restored), facts(&replayed), "step {step}: restore");
        let decided = decide(op, &replayed, &policy, &evidence, second);
        let from_checkpoint = decide(op, &restored, &policy, &evidence, second);
        assert_eq!(
            decided, from_checkpoint,
            "step {step} {op:?}: decisions differ"
        );
        let Ok(intents) = decided else {
            if std::env::var_os("SEQUENCE_TRACE").is_some() {
                eprintln!("step {step} {op:?}: {decided:?}");
            }
            continue;
        };
        let sealed = match seal_intents(
            contract,
            &bed.run_id,
            &replayed,
            (&owner, epoch),
            intents,
            &at,
        ) {
            Ok(sealed) => sealed,
            // The contract refused what was proposed: refused before any
            // write, as the pipeline does.
            Err(_) => continue,
        };
        // The line verifies as any reader would read it ...
        let verified = verifier
            .check_line(&sealed.line)
            .unwrap_or_else(|d| panic!("step {step} {op:?}: our line is damaged: {d:?}"));
        assert_eq!(
            verified, sealed.event,
            "step {step}: the verifier reads another event"
        );
        // ... replays without a breach ...
        let breaches = replayed.breach_count();
        replayed
            .apply_event(&verified, &replay_policy)
            .unwrap_or_else(|e| panic!("step {step} {op:?}: replay refuses our event: {e}"));
        assert_eq!(
            replayed.breach_count(),
            breaches,
            "step {step} {op:?}: our write is a breach: {:?}",
            replayed.breaches()
        );
        unjournaled
            .apply_ref(
                &ObjectRef::from_map(&verified, &bumpalo::Bump::new()),
                &replay_policy,
                OnRefusal::Spoil,
            )
            .unwrap_or_else(|e| panic!("step {step} {op:?}: replay refuses our event: {e}"));
        assert_eq!(
            facts(&unjournaled),
            facts(&replayed),
            "step {step}: without a journal"
        );
        // ... and the mutation's own state (pre-applied, then saved) is the
        // replay's.
        restored
            .apply_event(&sealed.event, &replay_policy)
            .unwrap_or_else(|e| panic!("step {step} {op:?}: pre-apply refuses: {e}"));
        assert_eq!(
            facts(&restored),
            facts(&replayed),
            "step {step}: after apply"
        );
        checkpoint = Checkpoint::save(&restored, &checkpoint.table.0);
        walk.used.push(evidence);
        committed.push(op.name());
    }
    committed
}

/// A run that gets going: approve, start, a lane that starts and acks, the
/// topology; then whatever is generated.
fn prelude() -> Vec<Op> {
    let fresh = Evidence::Fresh;
    vec![
        Op::Run(RunCommand::Approve),
        Op::Run(RunCommand::Start),
        Op::LaneCreate { lane: 0, agent: 0 },
        Op::Lane {
            command: LaneCommand::Start,
            lane: 0,
            agent: 0,
            evidence: fresh,
        },
        Op::Lane {
            command: LaneCommand::StartupAck,
            lane: 0,
            agent: 0,
            evidence: fresh,
        },
        Op::Register {
            owners: [0, 0],
            required: [true, true],
        },
    ]
}

/// An attempt to finish whatever state the generated steps left: every
/// lane completed by either agent, both checks passing, both components
/// covered, then `complete` (each refused where the state does not allow
/// it, like any other step).
fn finale() -> Vec<Op> {
    let fresh = Evidence::Fresh;
    let mut ops = Vec::new();
    for lane in 0..LANES.len() {
        for agent in 0..AGENTS.len() {
            ops.push(Op::Lane {
                command: LaneCommand::Complete,
                lane,
                agent,
                evidence: fresh,
            });
        }
    }
    for component in 0..COMPONENTS.len() {
        ops.push(Op::Check {
            component,
            passed: true,
            evidence: fresh,
        });
    }
    for component in 0..COMPONENTS.len() {
        ops.push(Op::ComponentEvidence {
            component,
            evidence: fresh,
        });
    }
    ops.push(Op::Complete { evidence: fresh });
    ops
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn decided_events_seal_replay_and_equal_the_checkpoint_restore(
        ops in prop::collection::vec(op(), 0..48)
    ) {
        let bed = bed();
        let mut all = prelude();
        all.extend(ops);
        all.extend(finale());
        run_sequence(&bed, &all);
    }
}

/// The prelude alone commits every step, and a whole run to `complete`
/// commits too: the generator's alphabet can reach the end of a run.
#[test]
fn a_whole_run_is_reachable() {
    let bed = bed();
    let fresh = Evidence::Fresh;
    let mut ops = prelude();
    ops.extend([
        Op::Heartbeat {
            lane: 0,
            agent: 0,
            evidence: fresh,
        },
        Op::Check {
            component: 0,
            passed: true,
            evidence: fresh,
        },
        Op::Check {
            component: 1,
            passed: true,
            evidence: fresh,
        },
        Op::Lane {
            command: LaneCommand::Complete,
            lane: 0,
            agent: 0,
            evidence: fresh,
        },
        Op::ComponentEvidence {
            component: 0,
            evidence: fresh,
        },
        Op::ComponentEvidence {
            component: 1,
            evidence: fresh,
        },
        Op::Complete { evidence: fresh },
    ]);
    assert_eq!(run_sequence(&bed, &ops).len(), ops.len());
}

/// Reused liveness evidence is refused by the decision, on the replay and
/// on the checkpoint alike (so never written, never a breach).
#[test]
fn a_heartbeat_reusing_evidence_is_not_committed() {
    let bed = bed();
    let fresh = Evidence::Fresh;
    let mut ops = prelude();
    let committed_before = ops.len() + 1;
    ops.extend([
        Op::Heartbeat {
            lane: 0,
            agent: 0,
            evidence: fresh,
        },
        // The evidence of the heartbeat before (the seventh committed).
        Op::Heartbeat {
            lane: 0,
            agent: 0,
            evidence: Evidence::Earlier(6),
        },
    ]);
    assert_eq!(run_sequence(&bed, &ops).len(), committed_before);
}

/// The generator reaches every command it names, committed: a property
/// that only ever saw refusals would prove nothing. Drawn from a fixed
/// seed, so the tally is the same on every run.
#[test]
fn generated_runs_commit_every_kind_of_command() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let bed = bed();
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    );
    let strategy = prop::collection::vec(op(), 24..48);
    let mut tally: BTreeMap<&str, usize> = BTreeMap::new();
    for _ in 0..64 {
        let mut ops = prelude();
        ops.extend(strategy.new_tree(&mut runner).unwrap().current());
        ops.extend(finale());
        for name in run_sequence(&bed, &ops).into_iter().skip(prelude().len()) {
            *tally.entry(name).or_default() += 1;
        }
    }
    for name in [
        "lane-create",
        "lane-start",
        "startup-ack",
        "lane-complete",
        "lane-fail/block/cancel",
        "heartbeat",
        "topology-register",
        "check-result",
        "component-evidence",
        "complete",
        "run-fail/block",
    ] {
        assert!(
            tally.get(name).is_some_and(|n| *n > 0),
            "{name} never committed: {tally:?}"
        );
    }
}
