//! The guarded mutation pipeline (reference-coordinator §2): open the run,
//! validate the run directory and the owner handle, take the lock, load the
//! verified state, prove ownership, check the expected head, decide, seal,
//! pre-apply, append, refresh caches. Authority is a type: appending needs
//! an [`OwnerProof`], which only [`authorize`] produces, under the lock,
//! against the freshly loaded state.

use crate::coordinator::decide::{InputRefusal, InputRule};
use crate::coordinator::inputs::TimedInput;
use crate::receipt::primitives::LaneId;
use crate::receipt::vocab::EventType;
use crate::store::input::{InputShape, JsonArg, read_json_input};
use serde::Serialize;
use serde_json::{Value, json};
use std::path::PathBuf;

use std::collections::BTreeMap;

use super::checkpoint::{
    CacheRefresh, LoadBasis, LoadPath, load_state, restore_digest_lists, save_checkpoint,
};
use super::error::{ErrorKind, FlowError, FlowResult};
use super::ledger::OpenRun;
use super::rebuild::coordinator_run_cache;
use crate::coordinator::decide::{Bug, Intent, Policy};
use crate::coordinator::{CoordinatorState, ReplayPolicy};
use crate::receipt::event::{EventDraft, SealedEvent};
use crate::receipt::primitives::{Instant, format_now, is_sha256_hex};
use crate::receipt::rules::{
    EventContract, INTENT_KEYS, check_event, check_evidence, metadata_fault,
};
use crate::receipt::verify::ChainPosition;
use crate::store::discovery::DiscoveryEnv;
use crate::store::handle::{OwnerHandle, check_contained, read_handle};
use crate::store::root::StateRoot;
use crate::store::run::AckHead;

/// Everything a mutation needs besides its decision.
#[derive(Debug, Clone)]
pub struct MutationContext {
    pub root: StateRoot,
    pub run_id: String,
    pub owner_file: PathBuf,
    pub expected_head: Option<String>,
    /// The wall clock, read once by the CLI: approval windows and the
    /// `--at` skew bound are judged by it.
    pub now: Instant,
    /// `--at`: the time the event records when its decision names none
    /// (contracts/commands.md "One clock"); the wall clock when absent.
    pub at: Option<String>,
    pub env: DiscoveryEnv,
}

/// An evidenced mutation after its first two steps: its run is open and
/// its `--evidence` read. The command reads its own inputs, checks them,
/// then commits once.
#[derive(Debug)]
pub struct OpenMutation {
    pub ctx: MutationContext,
    pub run: OpenRun,
    pub evidence: Value,
}

impl OpenMutation {
    /// Commit what `decide` decides on the checkpoint ([`DecideOn`]).
    pub fn commit(
        &self,
        decide: impl FnMut(&DecisionInput<'_>) -> Result<Vec<Intent>, FlowError>,
    ) -> FlowResult<MutationAnswer> {
        self.commit_on(DecideOn::Checkpoint, decide)
    }

    /// [`Self::commit`] deciding on a full replay.
    pub fn commit_replayed(
        &self,
        decide: impl FnMut(&DecisionInput<'_>) -> Result<Vec<Intent>, FlowError>,
    ) -> FlowResult<MutationAnswer> {
        self.commit_on(DecideOn::FullReplay, decide)
    }

    /// Commit what `decide` decides, on what `decide_on` says ([`mutate`]),
    /// and answer with the head it left.
    pub fn commit_on(
        &self,
        decide_on: DecideOn,
        decide: impl FnMut(&DecisionInput<'_>) -> Result<Vec<Intent>, FlowError>,
    ) -> FlowResult<MutationAnswer> {
        Ok(mutate(&self.ctx, &self.run, decide_on, decide)?.answer(&self.ctx.run_id))
    }
}

impl MutationContext {
    /// The time an event without a caller timestamp records: `--at`, else
    /// the wall clock.
    pub fn stamp(&self) -> String {
        self.at.clone().unwrap_or_else(|| format_now(self.now))
    }

    /// The first two steps of every evidenced mutation, in the reference's
    /// order: open the run this mutation writes, then read its
    /// `--evidence` (the command's own inputs and checks come after them).
    pub fn open_with_evidence(self, evidence: &JsonArg) -> FlowResult<OpenMutation> {
        let run = open_for_mutation(&self)?;
        let evidence = self.read_evidence(evidence)?;
        Ok(OpenMutation {
            ctx: self,
            run,
            evidence,
        })
    }

    /// This command's `--evidence`: a JSON list, inline, `-`, a file or a
    /// value received as such.
    pub fn read_evidence(&self, evidence: &JsonArg) -> FlowResult<Value> {
        self.read_json(evidence, InputShape::List, "--evidence")
    }

    /// This command's `--input`, of the top-level type `shape`.
    pub fn read_input(&self, input: &JsonArg, shape: InputShape) -> FlowResult<Value> {
        self.read_json(input, shape, "--input")
    }

    /// The JSON value given to `flag`, of the top-level type `shape`.
    pub fn read_json(&self, given: &JsonArg, shape: InputShape, flag: &str) -> FlowResult<Value> {
        let home = self.env.home.as_ref();
        Ok(read_json_input(&self.root, given, shape, home, flag)?)
    }

    /// This command's `--input` object of type `T`, its event time
    /// (`T::AT_KEY`) bound to `--at` ([`Self::bind_at`]).
    pub fn read_timed_input<T: TimedInput>(&self, input: &JsonArg) -> FlowResult<Value> {
        self.bind_at(self.read_input(input, InputShape::Object)?, T::AT_KEY)
    }

    /// An input whose event time is its `key` (`observed_at` of lane-create
    /// and heartbeat, `decided_at` of lane-reassign) under `--at`: an input
    /// without the key takes `--at`; one with it must name the same
    /// instant, so the event records the `--at` it was given.
    pub fn bind_at(&self, mut input: Value, key: &str) -> FlowResult<Value> {
        let (Some(at), Value::Object(map)) = (&self.at, &mut input) else {
            return Ok(input);
        };
        crate::coordinator::decide::check_at(at, self.now)?;
        match map.get(key) {
            None => {
                map.insert(key.into(), Value::String(at.clone()));
            }
            Some(Value::String(given)) if same_instant(given, at) => {}
            Some(given) => {
                let shown = given
                    .as_str()
                    .map_or_else(|| given.to_string(), str::to_string);
                return Err(FlowError::from(InputRefusal::AtDisagrees {
                    key: key.into(),
                    at: at.clone(),
                    shown,
                }));
            }
        }
        Ok(input)
    }
}

/// Two caller timestamps naming one instant (same text, or both parse to
/// the same UTC instant).
fn same_instant(a: &str, b: &str) -> bool {
    use crate::receipt::primitives::parse_timestamp;
    a == b || matches!((parse_timestamp(a), parse_timestamp(b)), (Some(x), Some(y)) if x == y)
}

/// What the decision sees: the replayed state, the run's policy and "now".
pub struct DecisionInput<'a> {
    pub state: &'a CoordinatorState,
    pub policy: &'a Policy,
    pub now: Instant,
}

/// Proof that the caller's owner handle matches the run's current owner,
/// checked under the lock. Only [`authorize`] constructs it.
#[derive(Debug)]
pub struct OwnerProof {
    fingerprint: String,
    epoch: u64,
}

/// Compare a handle with the replayed current owner.
pub fn authorize(state: &CoordinatorState, handle: &OwnerHandle) -> FlowResult<OwnerProof> {
    if state.owner_fingerprint() != Some(handle.fingerprint.as_str())
        || state.owner_epoch() != handle.epoch
    {
        return Err(FlowError::from(
            crate::coordinator::owner_refusal::OwnerRefusal {
                before_lock: false,
                handle_epoch: handle.epoch,
                owner_epoch: state.owner_epoch(),
            },
        ));
    }
    Ok(OwnerProof {
        fingerprint: handle.fingerprint.clone(),
        epoch: handle.epoch,
    })
}

/// The `--expected-head` syntax check, done before any input file is read.
pub fn check_expected_head_syntax(head: Option<&str>) -> FlowResult<()> {
    match head {
        Some(h) if !is_sha256_hex(h) => Err(FlowError::from(InputRule::ExpectedHeadSyntax)),
        _ => Ok(()),
    }
}

/// Open a run for a coordinator command: run id, snapshot, phase gate,
/// `--expected-head` syntax (the reference's precedence).
pub fn open_for_mutation(ctx: &MutationContext) -> FlowResult<OpenRun> {
    let run = super::ledger::open_run_for_mutation(&ctx.root, &ctx.run_id)?;
    run.require_phase2()?;
    check_expected_head_syntax(ctx.expected_head.as_deref())?;
    Ok(run)
}

/// The state a mutation produced, for the success envelope.
#[derive(Debug, Clone)]
pub struct Committed {
    pub sequence: u64,
    pub checksum: String,
    pub run_state: String,
    pub owner_epoch: u64,
    pub owner_fingerprint: Option<String>,
}

impl Committed {
    /// What the command answers about the event it committed.
    pub fn answer(&self, run_id: &str) -> MutationAnswer {
        MutationAnswer {
            run_id: run_id.to_string(),
            sequence: self.sequence,
            checksum: self.checksum.clone(),
            run_state: self.run_state.clone(),
        }
    }
}

/// The answer of a Phase 2 mutation (the reference's "state envelope"):
/// the run, and the head and run state its event left. A command that
/// tells more flattens this into its own answer, so these keys are
/// spelled once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MutationAnswer {
    pub run_id: String,
    /// The sequence of the run's last event.
    pub sequence: u64,
    /// The checksum of that event: the receipt head.
    pub checksum: String,
    pub run_state: String,
}

impl MutationAnswer {
    /// The same keys for a head read without a commit: a read-only check,
    /// or a report already bound (nothing appended).
    pub fn at_head(run_id: &str, state: &CoordinatorState) -> MutationAnswer {
        MutationAnswer {
            run_id: run_id.to_string(),
            sequence: state.last_sequence(),
            checksum: state.last_checksum().to_string(),
            run_state: state.run_state().to_string(),
        }
    }
}

/// The state a mutation decides on, under the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecideOn {
    /// The checkpoint, where the receipt proves the facts a decision rests
    /// on (super::proof); a full replay otherwise.
    Checkpoint,
    /// A full verify and replay, never the checkpoint: run-level
    /// transitions (`run-*`) are decided this way, as `complete` is, so an
    /// edited derived file cannot steer them.
    FullReplay,
}

/// The pipeline with the decision split in two: `gather` reads, under the
/// lock and against the loaded state, the facts the decision needs that are
/// not in the state (files, the verified receipt); `decide` then gets them
/// as a value and only decides.
pub fn mutate_gathered<F>(
    ctx: &MutationContext,
    run: &OpenRun,
    decide_on: DecideOn,
    mut gather: impl FnMut(&DecisionInput<'_>) -> Result<F, FlowError>,
    mut decide: impl FnMut(&DecisionInput<'_>, F) -> Result<Vec<Intent>, FlowError>,
) -> FlowResult<Committed> {
    mutate(ctx, run, decide_on, |input| {
        let facts = gather(input)?;
        decide(input, facts)
    })
}

/// [`mutate`] with an effect staged between the decision and the append:
/// `decide` only decides; `stage` runs, under the lock, only when the
/// decision succeeded, and the event is appended only when it succeeded
/// too (a report's file must exist before the event that binds it).
pub fn mutate_staged(
    ctx: &MutationContext,
    run: &OpenRun,
    mut decide: impl FnMut(&DecisionInput<'_>) -> Result<Vec<Intent>, FlowError>,
    stage: impl FnOnce() -> Result<(), FlowError>,
) -> FlowResult<Committed> {
    mutate_pipeline(
        ctx,
        run,
        DecideOn::Checkpoint,
        &mut decide,
        Some(Box::new(stage)),
    )
}

/// Run the pipeline with `decide` as the command's in-lock decision, taken
/// on what `decide_on` says.
pub fn mutate(
    ctx: &MutationContext,
    run: &OpenRun,
    decide_on: DecideOn,
    mut decide: impl FnMut(&DecisionInput<'_>) -> Result<Vec<Intent>, FlowError>,
) -> FlowResult<Committed> {
    mutate_pipeline(ctx, run, decide_on, &mut decide, None)
}

type Decide<'d> = dyn FnMut(&DecisionInput<'_>) -> Result<Vec<Intent>, FlowError> + 'd;
type Stage<'s> = Box<dyn FnOnce() -> Result<(), FlowError> + 's>;

fn mutate_pipeline(
    ctx: &MutationContext,
    run: &OpenRun,
    decide_on: DecideOn,
    decide: &mut Decide<'_>,
    stage: Option<Stage<'_>>,
) -> FlowResult<Committed> {
    if let Some(at) = &ctx.at {
        crate::coordinator::decide::check_at(at, ctx.now)?;
    }
    run.dir.validate()?;
    let owner_file = crate::store::paths::expand_tilde(&ctx.owner_file, ctx.env.home.as_ref());
    // Read as `<root>/handles/<name>`: from the held state root.
    let owner_file = check_contained(&ctx.root, &owner_file, &ctx.env.cwd)?;
    let handle = read_handle(ctx.root.at(&owner_file), Some(&ctx.run_id))?;
    let _guard = run.dir.receipt_lock().acquire()?;
    let policy = Policy::from_contract(
        &run.manifest.contract.contract,
        &run.manifest.contract.limits,
    );
    let replay_policy = ReplayPolicy::from_contract(&run.manifest.contract.contract);
    // A decision taken on the checkpoint stands only once the receipt
    // proves the facts it rests on (super::proof); otherwise it is taken
    // again on a full replay.
    let mut from_checkpoint = decide_on == DecideOn::Checkpoint;
    let (state, sealed, proof, position, basis, lanes_before) = loop {
        let (mut state, position, basis) = if from_checkpoint {
            load_state(run, true)?
        } else {
            let (state, position) = super::rebuild::replay_run(run, true)?;
            (state, position, LoadBasis::full_replay())
        };
        let proof = match authorize(&state, &handle) {
            // The owner a checkpoint names is a cached fact too: a refusal
            // on it is confirmed on the receipt.
            Err(_) if basis.path == LoadPath::Checkpoint => {
                from_checkpoint = false;
                continue;
            }
            other => other?,
        };
        if let Some(expected) = &ctx.expected_head
            && *expected != position.checksum
        {
            return Err(ErrorKind::HeadMoved {
                expected: expected.clone(),
                head: position.checksum.clone(),
                sequence: position.sequence,
            }
            .into());
        }
        let input = DecisionInput {
            state: &state,
            policy: &policy,
            now: ctx.now,
        };
        let lanes_before = lane_fingerprints(&state);
        let before: BTreeMap<String, super::proof::LaneBefore> = state
            .lanes()
            .iter()
            .map(|(id, lane)| {
                (
                    id.to_string(),
                    super::proof::LaneBefore {
                        record: lane.to_json_with_digests(false),
                        source: state.lane_source(id),
                    },
                )
            })
            .collect();
        let decided = decide(&input);
        // A digest the table could not read was answered "present": the
        // decision (a refusal, most likely) rests on a read error, which is
        // what the caller is told.
        if let Some(error) = basis.lookup_error() {
            return Err(error.into());
        }
        let checkpointed = basis.path == LoadPath::Checkpoint;
        let intents = match decided {
            // A refusal taken on the checkpoint is given only when the
            // receipt proves every lane, the owner and the run state it saw
            // (the run state's line is far back in a long run: refusals
            // there are decided on a full replay)
            // and no "present" of the digest table took part; otherwise it
            // is decided again on a full replay (a forged cache must not
            // refuse what the receipt allows, nor refuse differently).
            Err(_)
                if checkpointed
                    && (basis.table_answered_present()
                        || !super::proof::prove(
                            run,
                            &state,
                            &position,
                            &before,
                            &before.keys().cloned().collect::<Vec<_>>(),
                            true,
                        )) =>
            {
                from_checkpoint = false;
                continue;
            }
            other => other?,
        };
        let sealed = seal(run, &state, &proof, intents, &ctx.stamp())?;
        let breaches_before = state.breach_count();
        let applied = pre_apply(&mut state, &sealed, &replay_policy);
        if let Some(error) = basis.lookup_error() {
            return Err(error.into());
        }
        if checkpointed {
            let after = lane_fingerprints(&state);
            // The lanes the event changes, and those it names or names the
            // component of (a component's evidence rests on its owner
            // lane's state): each is proven from its own line.
            let named = super::proof::named_strings(&sealed.event);
            let owners = state
                .topology()
                .iter()
                .filter(|(id, _)| named.contains(id.as_str()))
                .map(|(_, component)| component.owner_lane.clone());
            let mut touched: std::collections::BTreeSet<String> = after
                .iter()
                .filter(|(id, f)| lanes_before.get(*id) != Some(*f) || named.contains(id.as_str()))
                .map(|(id, _)| id.clone())
                .collect();
            touched.extend(owners.filter(|lane| before.contains_key(lane)));
            let touched: Vec<String> = touched.into_iter().collect();
            let proven = applied.is_ok()
                && after.len() == lanes_before.len()
                && super::proof::prove(run, &state, &position, &before, &touched, false);
            if !proven {
                from_checkpoint = false;
                continue;
            }
        }
        applied?;
        // We never write what our own replay records as a breach.
        let new = (state.breach_count() - breaches_before) as usize;
        if let Some(breach) = state
            .breaches()
            .get(state.breaches().len().saturating_sub(new))
            .filter(|_| new > 0)
        {
            return Err(FlowError::contract(format!(
                "refusing to append an event that breaks our rules: {}",
                breach.describe()
            )));
        }
        break (state, sealed, proof, position, basis, lanes_before);
    };
    if let Some(stage) = stage {
        stage()?;
    }
    run.dir.prepare_cache_paths(
        &lanes_before
            .keys()
            .cloned()
            .chain(state.lanes().keys().map(LaneId::to_string))
            .collect::<std::collections::BTreeSet<_>>(),
    )?;
    test_pause_before_append();
    append(run, &proof, &sealed, position.byte_length)?;
    super::transparency::extend_tree(
        &run.dir,
        (
            position.sequence,
            position.byte_length,
            position.last_line_length,
        ),
        &sealed.line,
    );
    let after = ChainPosition {
        sequence: state.last_sequence(),
        checksum: sealed.checksum.to_string(),
        byte_length: position.byte_length + sealed.line.len() as u64,
        owner_fingerprint: state.owner_fingerprint().map(str::to_string),
        owner_epoch: state.owner_epoch(),
        last_line_length: sealed.line.len() as u64,
    };
    let committed = Committed {
        sequence: state.last_sequence(),
        checksum: state.last_checksum().to_string(),
        run_state: state.run_state().to_string(),
        owner_epoch: state.owner_epoch(),
        owner_fingerprint: state.owner_fingerprint().map(str::to_string),
    };
    refresh_derived(run, &basis, state, &after, &lanes_before);
    Ok(committed)
}

/// After the append: the checkpoint for the next command, then the caches
/// when they are due. Both are conveniences: the receipt is already
/// durable, so their failure must not turn a committed event into a
/// reported failure (the next command then replays in full).
fn refresh_derived(
    run: &OpenRun,
    basis: &LoadBasis,
    mut state: CoordinatorState,
    after: &ChainPosition,
    lanes_before: &BTreeMap<String, (Value, usize)>,
) {
    let sequence = state.last_sequence();
    let refresh = basis.cache_refresh(sequence);
    let caches_sequence = match refresh {
        CacheRefresh::Skip => basis.caches_sequence(),
        _ => sequence,
    };
    let before = (refresh == CacheRefresh::ChangedLanes).then_some(lanes_before);
    match save_checkpoint(run, basis, &state, after, caches_sequence) {
        Ok(_) if refresh == CacheRefresh::Skip => {}
        Ok(log_bytes) => {
            if restore_digest_lists(run, basis, log_bytes, &mut state).is_ok() {
                let _ = write_caches(run, &state, before);
            }
        }
        // No checkpoint: the caches can still be written from a full state.
        Err(_) if basis.path == LoadPath::FullReplay => {
            let _ = write_caches(run, &state, before);
        }
        Err(_) => {}
    }
}

/// Each lane's record without its digest list, plus its digest count: what
/// tells whether a lane's cache changed, at a cost that does not grow with
/// its heartbeats.
fn lane_fingerprints(state: &CoordinatorState) -> BTreeMap<String, (Value, usize)> {
    state
        .lanes()
        .iter()
        .map(|(id, lane)| {
            (
                id.to_string(),
                (
                    lane.to_json_with_digests(false),
                    lane.liveness_digest_count(),
                ),
            )
        })
        .collect()
}

/// Apply the sealed event to the loaded state before it is written. Our
/// replay refusing what our decision proposed is a bug in the decision,
/// not damage: nothing was written and the receipt is intact, so this is
/// no `receipt_corrupt` sending the caller to `receipt-diagnose` but exit 2
/// `contract_error` saying so (DEVIATIONS 55).
fn pre_apply(
    state: &mut CoordinatorState,
    sealed: &SealedEvent,
    policy: &ReplayPolicy,
) -> FlowResult<()> {
    state.apply_event(&sealed.event, policy).map_err(|e| {
        ErrorKind::Internal(Bug::EventDoesNotApply {
            sequence: state.last_sequence() + 1,
            why: e.message,
        })
        .into()
    })
}

fn intent_value(intent: &Intent, epoch: u64, now: &str) -> Value {
    let mut metadata = intent.metadata.clone();
    metadata.insert("owner_epoch".into(), json!(epoch));
    json!({
        "agent_id": intent.agent_id,
        "event_type": intent.event_type,
        "evidence_refs": intent.evidence_refs,
        "from_state": intent.from_state,
        "lane_id": intent.lane_id,
        "metadata": metadata,
        "owner_epoch": epoch,
        "reason": intent.reason,
        "timestamp": intent.timestamp.clone().unwrap_or_else(|| now.to_string()),
        "to_state": intent.to_state,
    })
}

/// Normalise the intents (§2 step 9), build the event and check it.
fn seal(
    run: &OpenRun,
    state: &CoordinatorState,
    proof: &OwnerProof,
    intents: Vec<Intent>,
    now: &str,
) -> FlowResult<SealedEvent> {
    seal_intents(
        &run.manifest.contract,
        &run.dir.run_id,
        state,
        (&proof.fingerprint, proof.epoch),
        intents,
        now,
    )
}

/// The pure part of [`seal`]: the event `intents` make on top of `state`
/// for the owner `(fingerprint, epoch)`, numbered, chained, sealed and
/// checked against the run's contract. No I/O: the sequence property test
/// drives it without a state root.
pub(crate) fn seal_intents(
    contract: &crate::receipt::manifest::ManifestContract,
    run_id: &str,
    state: &CoordinatorState,
    (fingerprint, epoch): (&str, u64),
    intents: Vec<Intent>,
    now: &str,
) -> FlowResult<SealedEvent> {
    let values: Vec<Value> = intents
        .iter()
        .map(|i| intent_value(i, epoch, now))
        .collect();
    for (intent, value) in intents.iter().zip(&values) {
        if !contract.event_types.contains(&intent.event_type) {
            return Err(FlowError::from(InputRule::EventNotAllowed));
        }
        check_evidence(&value["evidence_refs"], &contract.limits).map_err(|m| {
            crate::coordinator::decide::evidence_refusal(
                m,
                &value["evidence_refs"],
                &contract.limits,
            )
        })?;
        metadata_fault(
            intent.event_type,
            Some(&value["metadata"]),
            &contract.limits,
            epoch,
            values.len() > 1,
        )
        .map_err(|fault| crate::coordinator::decide::metadata_refusal(fault, &contract.limits))?;
        debug_assert_eq!(value.as_object().map(|m| m.len()), Some(INTENT_KEYS.len()));
    }
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let draft = match values.as_slice() {
        [single] => EventDraft {
            run_id: run_id.to_string(),
            lane_id: intents[0].lane_id.clone(),
            agent_id: intents[0].agent_id.clone(),
            sequence: state.last_sequence() + 1,
            event_type: intents[0].event_type,
            from_state: text(single, "from_state"),
            to_state: text(single, "to_state"),
            timestamp: text(single, "timestamp").unwrap_or_default(),
            owner_token: fingerprint.to_string(),
            manifest_hash: contract.hash.clone(),
            previous_checksum: state.last_checksum().to_string(),
            evidence_refs: single["evidence_refs"].clone(),
            reason: text(single, "reason"),
            metadata: Some(single["metadata"].clone()),
        },
        [_, second] => EventDraft {
            run_id: run_id.to_string(),
            lane_id: None,
            agent_id: None,
            sequence: state.last_sequence() + 1,
            event_type: EventType::TransactionCommitted,
            from_state: None,
            to_state: None,
            timestamp: text(second, "timestamp").unwrap_or_default(),
            owner_token: fingerprint.to_string(),
            manifest_hash: contract.hash.clone(),
            previous_checksum: state.last_checksum().to_string(),
            evidence_refs: json!([]),
            reason: None,
            metadata: Some(json!({"owner_epoch": epoch, "intents": values})),
        },
        _ => {
            return Err(FlowError::contract(
                "coordinator mutation must return one or two intents",
            ));
        }
    };
    let sealed = draft.seal();
    let rules = EventContract {
        family: contract.family,
        event_types: &contract.event_types,
        limits: &contract.limits,
        epoch,
    };
    check_event(&sealed.event, &rules).map_err(ErrorKind::Contract)?;
    if sealed.line.len() as u64 - 1 > contract.limits.max_receipt_line_bytes {
        return Err(FlowError::from(InputRule::ReceiptLineTooLong));
    }
    Ok(sealed)
}

/// Test-only (debug builds): with `BLUETAPE_TEST_PAUSE_BEFORE_APPEND=<path>`
/// a mutation holding the lock, its line sealed, creates `<path>.ready` and
/// waits (at most a minute) until `<path>` exists before it appends, so a
/// test can act as another writer at exactly that moment
/// (`tests/it/namespaces.rs`).
fn test_pause_before_append() {
    if !cfg!(debug_assertions) {
        return;
    }
    let Some(go) = std::env::var_os("BLUETAPE_TEST_PAUSE_BEFORE_APPEND") else {
        return;
    };
    let go = std::path::PathBuf::from(go);
    let mut ready = go.clone().into_os_string();
    ready.push(".ready");
    let _ = std::fs::write(&ready, b"");
    let started = std::time::Instant::now();
    while !go.exists() && started.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Append one sealed line: only with an owner proof. The acknowledged head
/// is recorded after the fsync, before success is reported.
fn append(
    run: &OpenRun,
    _proof: &OwnerProof,
    sealed: &SealedEvent,
    byte_length: u64,
) -> FlowResult<()> {
    // Refused unless the receipt is still the length the state was loaded
    // from (trust-model §2 promise 7).
    run.dir.append_receipt_after(&sealed.line, byte_length)?;
    // The event is durable now, so nothing after this point may report a
    // failure. A head that could not be recorded only lags behind the
    // receipt, which verify accepts (a longer receipt is fine).
    let sequence = sealed.event["sequence"].as_u64().unwrap_or_default();
    // It pins as canonical only lines the load saw canonical (DEVIATIONS 105).
    let head = run.dir.read_head().ok().flatten();
    let _ = run.dir.write_head(&AckHead {
        sequence,
        checksum: sealed.checksum.clone(),
        byte_length: byte_length + sealed.line.len() as u64,
        canonical_through: super::ledger::canonical_through(run, head.as_ref(), sequence),
    });
    Ok(())
}

/// Rewrite run.json and the lane caches: only lanes that changed when
/// `before` (the caches were current before this event) is given, else all
/// (removing caches of lanes that no longer exist).
fn write_caches(
    run: &OpenRun,
    state: &CoordinatorState,
    before: Option<&BTreeMap<String, (Value, usize)>>,
) -> FlowResult<()> {
    let after = lane_fingerprints(state);
    if !after.is_empty() {
        run.dir.ensure_lanes_dir()?;
    }
    for (lane_id, lane) in state.lanes() {
        if before.is_none_or(|b| b.get(lane_id.as_str()) != after.get(lane_id.as_str())) {
            run.dir.write_cache(
                &run.dir.lanes_dir().join(format!("{lane_id}.json")),
                &lane.to_json(),
            )?;
        }
    }
    let stale: Vec<String> = match before {
        Some(before) => before
            .keys()
            .filter(|id| !after.contains_key(*id))
            .cloned()
            .collect(),
        None => run
            .dir
            .lane_cache_ids()?
            .into_iter()
            .filter(|id| !after.contains_key(id))
            .collect(),
    };
    for lane_id in stale {
        run.dir.remove_lane_cache(&lane_id)?;
    }
    let cache = coordinator_run_cache(&run.dir.run_id, &run.manifest.contract.hash, state);
    run.dir.write_cache(&run.dir.run_cache_path(), &cache)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::RunOrigin;
    use crate::receipt::event::EventDraft;

    /// A mutation answers the four keys of the reference's state envelope,
    /// typed as the envelope prints them.
    #[test]
    fn a_mutation_answers_the_state_envelope_keys() {
        let committed = Committed {
            sequence: 7,
            checksum: "c".repeat(64),
            run_state: "running".into(),
            owner_epoch: 2,
            owner_fingerprint: None,
        };
        assert_eq!(
            serde_json::to_value(committed.answer("r1")).unwrap(),
            json!({"run_id": "r1", "sequence": 7, "checksum": "c".repeat(64), "run_state": "running"})
        );
    }

    /// A decision our own replay refuses is a bug of ours, reported as one:
    /// not `receipt_corrupt` with `receipt-diagnose` (nothing was written).
    #[test]
    fn an_event_that_fails_to_pre_apply_is_an_internal_error_not_corruption() {
        let fingerprint = "a".repeat(64);
        let mut state = CoordinatorState::new(&RunOrigin {
            owner_fingerprint: Some(fingerprint.clone()),
            owner_epoch: 1,
            approved_component_ids: vec![],
        });
        let before = state.public_json();
        // A lane event for a lane that does not exist: replay refuses it.
        let sealed = EventDraft {
            run_id: "r".into(),
            lane_id: LaneId::parse("ghost"),
            agent_id: crate::receipt::primitives::AgentId::parse("agent"),
            sequence: 1,
            event_type: EventType::LaneStarted,
            from_state: Some("pending".into()),
            to_state: Some("starting".into()),
            timestamp: "2026-07-14T01:00:00Z".into(),
            owner_token: fingerprint,
            manifest_hash: "0".repeat(64),
            previous_checksum: String::new(),
            evidence_refs: json!([{"kind": "k", "summary": "s"}]),
            reason: None,
            metadata: Some(json!({"owner_epoch": 1})),
        }
        .seal();
        let error = pre_apply(&mut state, &sealed, &ReplayPolicy::default()).unwrap_err();
        assert!(
            matches!(
                error.kind(),
                ErrorKind::Internal(Bug::EventDoesNotApply { sequence: 1, .. })
            ),
            "{error:?}"
        );
        assert!(
            error.message().starts_with("internal error:")
                && error.message().contains("nothing was written"),
            "{}",
            error.message()
        );
        let (code, name, _, next) = error.classify();
        assert_eq!((code, name, next), (2, "contract_error", None));
        // The refused event left the state as it was.
        assert_eq!(state.public_json(), before);
    }
}
