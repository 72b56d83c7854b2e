//! Why an input is refused (exit 2 `contract_error`, not retryable, no
//! `next_command`; contracts/refusals.md "Bad input"): a typed reason whose
//! message is the reference's text, made from the reason's fields, and
//! whose `fields` and hint, where they follow from the reason alone, are
//! its teaching. What only the place that refused knows (the `--input` key
//! at fault, the value the caller gave) is still attached there as
//! [`Teaching`].

use serde_json::json;

use super::decide::{ErrorKind, FlowError, MAX_AT_SKEW_SECONDS, Teaching};
use crate::receipt::lax_time::LaxTimeError;

/// The rules whose message names no value: one variant each, with the
/// reference's message (and, for a few, a fixed teaching).
macro_rules! input_rules {
    ($($(#[$doc:meta])* $rule:ident => $message:literal,)*) => {
        /// An input rule whose message is fixed text.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum InputRule {
            $($(#[$doc])* $rule,)*
        }

        impl InputRule {
            /// Every rule, for tests that walk them all.
            #[cfg(test)]
            pub const ALL: &'static [InputRule] = &[$(InputRule::$rule,)*];

            /// The reference's message (ours for our own rules).
            pub fn message(self) -> &'static str {
                match self {
                    $(InputRule::$rule => $message,)*
                }
            }
        }
    };
}

input_rules! {
    // The input object's shape (reference-coordinator §1.4).
    FieldsMismatch => "JSON input fields do not match the command contract",
    WrongTopLevelType => "JSON input has the wrong top-level type",
    LifecycleNeedsEvidence => "lifecycle transition requires evidence",
    // lane-create
    DeadlineOrder => "deadlines must satisfy observed_at < startup_ack_deadline <= command_deadline",
    ReplacementCountNegative => "replacement_count must be a non-negative integer",
    AssignmentBlank => "assignment must be non-empty",
    FallbackBlank => "fallback must be non-empty",
    // lane transitions
    ChangedPathsNotStrings => "changed paths must be non-empty strings",
    ChangedPathsNotCanonical => "changed paths must already be canonical",
    CompletionNeedsChangedPaths => "lane completion requires verified changed paths",
    LivenessCannotComplete => "liveness evidence cannot complete a lane",
    // lane-reassign and the replacement steps
    ReplacementLaneSame => "replacement lane id must differ from original",
    ReplacementAssignmentBlank => "replacement assignment must be non-empty",
    /// A literal-word rule (cli-conventions §5 "Rules by name").
    ReplacementCheckpointContext => "replacement assignment must identify recovered checkpoint context",
    /// A literal-word rule (cli-conventions §5 "Rules by name").
    CheckpointRecoveryEvidence => "checkpoint recovery evidence is required",
    ReplacementAgentSame => "replacement agent must differ from original",
    ReplacementAssignmentSame => "replacement assignment must describe resumed work",
    ReplacementScopeWider => "replacement write scope must be equal or narrower",
    ChildScopeWider => "child lane write scope must be equal to or narrower than its parent's",
    CheckpointVerificationMissing => "checkpoint verification evidence is missing",
    // the reports
    ReportFields => "report fields do not match the fixed contract",
    ReportForbiddenTerms => "report contains forbidden secret or raw-output fields",
    OwnerEpochNotPositive => "owner_epoch must be a positive integer",
    TargetHashes => "target_hashes must contain bounded SHA-256 entries",
    CommandIds => "command_ids must be a bounded non-empty list",
    TimestampsAlign => "timestamps must align with command_ids",
    ReportTimestamp => "report timestamp must be a UTC timestamp",
    ExitStatusNotInteger => "exit_status must be an integer",
    ReportRunId => "report run_id does not match",
    // lane-resolve
    ResolveItself => "failed lane cannot resolve itself",
    ResolutionEvidenceUnbound => "resolution evidence must bind failed and completed lane evidence",
    // the topology and its checks
    TopologyCount => "topology component count is outside the limit",
    TopologyCoverage => "registered topology must begin without coverage evidence",
    TopologySnapshot => "topology must match the approved component snapshot",
    TopologyCycle => "topology dependency cycle",
    RemovalNeedsReason => "topology component removal requires a reason",
    CheckPassedNotBool => "check result passed must be a boolean",
    ReceiptReasonTooLong => "receipt reason must be at most 500 characters",
    LivenessCannotPassCheck => "liveness evidence cannot pass a check",
    LivenessCannotSatisfyCompletion => "liveness evidence cannot satisfy completion evidence",
    // liveness
    LivenessWindow => "liveness window exceeds the timestamp range",
    LivenessEvidenceRequired => "liveness evidence is required",
    LivenessReasonRequired => "liveness reason is required",
    /// Its hint: new evidence is needed (DEVIATIONS 90).
    LivenessEvidenceUnchanged => "liveness evidence is unchanged",
    /// Its hint: what is new since the last heartbeat.
    LivenessEvidenceRecorded => "liveness evidence was already recorded for this lane",
    HeartbeatDeadlineOrder => "heartbeat deadlines must satisfy observed_at < lease <= command_deadline",
    LivenessDecisionInvalid => "liveness decision is invalid",
    StallReasonRequired => "stall reason is required",
    StallNeedsSuspectStall => "stall recording requires a suspect_stall decision",
    StallEvidenceUnbound => "stall evidence must bind the liveness decision checksum",
    ProbeDeadlineGrace => "probe deadline must be within the manifest probe grace",
    /// A literal-word rule (cli-conventions §5 "Rules by name").
    InterruptToolEvidence => "native interrupt tool evidence is required",
    // recovery-run-create
    RecoveryNeedsBlockedDiagnosis => "recovery run requires a blocked receipt diagnosis",
    DiagnosisChecksum => "receipt diagnosis checksum does not match",
    // the approval gate
    ReservedEvidenceKinds => "evidence kinds approval_policy, approver_identity and approver_signature are reserved for the approval gate",
    // the commands around the core
    ExpectedHeadSyntax => "expected receipt head must be lowercase SHA-256",
    EventNotAllowed => "run manifest does not allow event",
    ReceiptLineTooLong => "receipt event exceeds max_receipt_line_bytes",
    UnknownWorkflowType => "unknown workflow type",
    NoComponents => "component list must not be empty",
    RepoRootNotUtf8 => "repo_root must be valid UTF-8",
    NoRepoRoot => "run manifest has no repo_root",
    SameOwnerHandle => "new owner handle must differ from current owner handle",
    /// The next owner epoch would not fit (an epoch is a positive integer).
    OwnerEpochOverflow => "owner epoch must be a positive integer",
    DamagedRunComponents => "damaged run component_ids are invalid",
    NoApprovalPolicy => "the run has no approval policy: there is nothing to sign",
    UnsignedApprovalPolicy => "the run's approval policy pins no approver_key: approvals are not signed",
    StatementInStateRoot => "approval-statement --out must name a file outside the state root (the command is read-only there)",
    // the command line's own flags
    CommandStatusChoice => "invalid choice for --command-status",
    /// Its hint: the formats that follow.
    FollowJson => "--format json prints one document when the receipt is read; it cannot follow",
    LaneFilter => "--lane must be a lane identifier",
    TypeFilter => "--type must be an event type of the run's manifest",
    CheckProofArgs => "check-proof needs --proof FILE --event FILE, or --append FILE",
    BundleVerifyArgs => "bundle-verify needs FILE, or --git DIR --ref REF",
    // `mcp`: modes only narrow
    McpOwnerNeedsHandle => "mcp --mode owner needs --owner-file: the handle its tools act with",
    McpReadOnlyHandle => "mcp --mode read-only acts with no owner handle; drop --owner-file or use --mode owner",
    /// Its hint: rename the handle.
    McpHandleNotUtf8 => "mcp --owner-file must be a path that is valid UTF-8 text",
    // otel-export's target (contracts/otel.md)
    OtelHeaderWithOut => "--header is for --endpoint; --out writes a file",
    OtelForceWithoutOut => "--force is for --out",
    OtelNoTarget => "otel-export needs --endpoint URL or --out FILE (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT)",
    OtelHeaderShape => "--header must be KEY=VALUE (the value is not shown)",
    // signed heads, proofs, bundles and publications
    NoSignedHead => "the run has no signed head; run sign-head first",
    CheckProofNeedsKey => "check-proof needs --key",
    /// Its `fields` and hint: `--key` checks signed heads, and where to get one.
    BundleNoSignedHead => "bundle refused: the bundle holds no signed head to check with the given keys",
    NoRepoToPublish => "the run names no repo_root; pass --repo",
}

impl InputRule {
    /// The fixed teaching of the rules that have one: the literal-word
    /// rules say the word, where it must be and a value that passes
    /// (cli-conventions §5 "Rules by name"); the liveness-evidence rules say
    /// what evidence renews a lease.
    pub fn teaching(self) -> Option<Teaching> {
        let word = |input: &str, field: &str, expected: &str, hint: &str| Teaching {
            detail: None,
            hint: Some(hint.to_string()),
            fields: Some(json!({
                "input": input,
                "invalid": [{"field": field, "expected": expected}],
            })),
        };
        Some(match self {
            InputRule::ReplacementCheckpointContext => word(
                "--input",
                "replacement_assignment",
                "a text containing the word \"checkpoint\" (any case)",
                "the replacement_assignment must contain the word \"checkpoint\" (any case) and say which checkpoint the replacement resumes from, e.g. \"replacement_assignment\": \"Resume the API from the recovered checkpoint: handlers done, tests pending\"",
            ),
            InputRule::CheckpointRecoveryEvidence => word(
                "--evidence",
                "summary",
                "an item of kind \"recovery\" whose summary contains the word \"checkpoint\" (any case)",
                "--evidence needs an item of kind \"recovery\" whose summary contains the word \"checkpoint\" (any case), e.g. [{\"kind\": \"recovery\", \"summary\": \"recovered checkpoint: handlers done, tests pending\"}]",
            ),
            InputRule::InterruptToolEvidence => word(
                "--evidence",
                "summary",
                "an item of kind \"tool\" whose summary contains the word \"interrupt\" (any case)",
                "--evidence needs the native interrupt tool's result: an item of kind \"tool\" whose summary contains the word \"interrupt\" (any case), e.g. [{\"kind\": \"tool\", \"summary\": \"interrupt sent to the agent: it stopped\"}]",
            ),
            InputRule::LivenessEvidenceUnchanged => Teaching::hint(
                "heartbeat and stall-clear need new evidence: an observation this lane has not recorded before (a new reason with the same evidence is refused too), e.g. [{\"kind\": \"log\", \"summary\": \"tests 41/60 passing at 01:05\"}]",
            ),
            InputRule::LivenessEvidenceRecorded => Teaching::hint(
                "record what is new since the last heartbeat: evidence this lane already recorded cannot renew its lease again",
            ),
            InputRule::McpHandleNotUtf8 => Teaching::hint(
                "rename the handle (or a directory on its path) to a UTF-8 name, then start the server again; the CLI takes any path",
            ),
            InputRule::BundleNoSignedHead => Teaching {
                detail: None,
                hint: Some("--key checks signed heads, and this bundle has none: sign the run first where it lives (bluetape-flow sign-head --run-id {run_id} --key SIGNER) and export it again, pass the head kept elsewhere with --head FILE, or drop --key to verify the unsigned bundle".into()),
                fields: Some(json!({"input": "--key", "heads": 0})),
            },
            InputRule::FollowJson => Teaching::hint(
                "follow with --format jsonl (a line per event as it is appended) or --format table",
            ),
            _ => return None,
        })
    }
}

/// Why an input is refused: a rule of fixed text, or a rule about a named
/// field or value, with what its message and teaching are made of. The
/// message (exactly the reference's bytes where the reference refuses so)
/// is its `Display`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputRefusal {
    /// A rule whose message names no value.
    #[error("{}", .0.message())]
    Rule(InputRule),
    #[error("{field} must match the identifier contract")]
    Identifier { field: String },
    #[error("{field} must be a UTC timestamp")]
    Timestamp { field: String },
    /// A caller timestamp the reference's lax reading refuses (or one that
    /// is no string): the lax reader's message.
    #[error("{}", .0.message())]
    LaxTimestamp(LaxTimeError),
    /// A report's checksum field.
    #[error("{field} must be lowercase SHA-256")]
    Sha256 { field: String },
    #[error("duplicate component id: {id}")]
    DuplicateComponent { id: String },
    #[error("unknown topology owner lane: {owner}")]
    UnknownOwnerLane { owner: String },
    #[error("unknown component dependencies: {}", .names.join(", "))]
    UnknownDependencies { names: Vec<String> },
    /// A write scope (or its `parent`'s) that cannot be combined with the
    /// other; `rule` is the receipt contract's words.
    #[error("{}write scope is malformed: {rule}", if *.parent { "parent lane " } else { "" })]
    MalformedScope { parent: bool, rule: &'static str },
    /// `at` is more than [`MAX_AT_SKEW_SECONDS`] after `clock`
    /// (contracts/commands.md "One clock").
    #[error(
        "--at must not be in the future: '{at}' is more than {} seconds after this machine's clock ({clock})",
        MAX_AT_SKEW_SECONDS
    )]
    AtInFuture { at: String, clock: String },
    /// The event records one time. `shown` is the input's value as the
    /// message quotes it.
    #[error("--at and the input's {key} disagree: --at '{at}', {key} '{shown}'")]
    AtDisagrees {
        key: String,
        at: String,
        shown: String,
    },
    /// At most `max` seconds after observed_at, `latest` that instant
    /// (when it exists).
    #[error("silence lease exceeds manifest maximum")]
    LeaseTooLong { max: i64, latest: Option<String> },
    /// Under an approval policy the evidence list must leave room for the
    /// gate's record: at most `max` entries (one record, or two when
    /// `signed`).
    #[error(
        "under {} approval policy the evidence may hold at most {max} entries: {} the decision",
        if *.signed { "a signed" } else { "an" },
        if *.signed { "two more record" } else { "one more records" }
    )]
    EvidenceRoom { max: u64, signed: bool },
    /// Standard input can feed one JSON option per call; `flags` (two or
    /// more) asked for it.
    #[error("standard input can feed one JSON option per call, not {}", .flags.join(" and "))]
    SharedStdin { flags: Vec<String> },
    /// An `otel-export` header whose name (given by `origin`: `--header`
    /// or the variable) is no HTTP token.
    #[error("{origin}: a header name must be an HTTP token (KEY=VALUE)")]
    OtelHeaderName { origin: String },
    /// A header value that cannot be sent: never shown, only its `name`.
    #[error(
        "{origin}: the value of header {name} must be printable ASCII without line breaks, at most {max_bytes} bytes (the value is not shown)"
    )]
    OtelHeaderValue {
        origin: String,
        name: String,
        max_bytes: usize,
    },
    #[error("at most {max} headers may be sent")]
    OtelTooManyHeaders { max: usize },
    /// A headers `variable` that is not `key=value,…`.
    #[error("{variable} must be a list of key=value pairs separated by commas")]
    OtelHeaderList { variable: String },
    /// A header value of `variable` that is not percent-encoding.
    #[error(
        "{variable}: the value of header {name} is not valid percent-encoding (the value is not shown)"
    )]
    OtelHeaderEncoding { variable: String, name: String },
    #[error("{variable} must be a number of milliseconds from 1 to 600000")]
    OtelTimeout { variable: String },
    /// An endpoint (from `origin`: `--endpoint` or the variable) that is
    /// no absolute http(s) URL.
    #[error("{origin} must be an absolute http:// or https:// URL")]
    OtelEndpoint { origin: String },
    /// A protocol `variable` asking for `protocol` (cut short for the
    /// message), not http/protobuf.
    #[error("{variable} asks for {protocol}: otel-export sends only http/protobuf")]
    OtelProtocol { variable: String, protocol: String },
    /// `prove-event --sequence` outside 1..=`size` of the head.
    #[error("sequence must be between 1 and the head's size {size}")]
    ProofSequence { size: u64 },
    /// `prove-append --from` a head of `old` events, newer than the head
    /// of `new`.
    #[error("--from is a head of {old} events, newer than the head of {new}")]
    ProofFromNewer { old: u64, new: u64 },
    /// `publish --ref` outside the publication refs `under`: a branch or a
    /// tag is never written (DEVIATIONS 90); its hint names the run's own
    /// ref.
    #[error("{reference} is not a publication ref: publish writes only refs under {under}")]
    NotPublicationRef {
        reference: String,
        under: &'static str,
        run_id: String,
    },
    /// `publish --ref` that git does not take as a ref under refs/.
    #[error("{reference} is not a valid ref under refs/")]
    InvalidRef { reference: String },
    /// `bundle-verify --git DIR --ref REF` with a ref that names no commit
    /// in the clone `dir`: most often the publications `under` were not
    /// fetched, which its hint says.
    #[error("{reference} does not name a commit in {dir}")]
    RefNotCommit {
        reference: String,
        dir: String,
        under: &'static str,
    },
    #[error("BLUETAPE_APPROVED_BY must be {rule}")]
    ApproverIdentity { rule: &'static str },
    /// The diagnosis lacks `key` (the reference's `KeyError`, printed as
    /// `'key'`).
    #[error("'{key}'")]
    DiagnosisKey { key: String },
    /// A damaged run's field that `recovery-run-create` cannot take.
    #[error("damaged run {key} is invalid")]
    DamagedRunField { key: String },
    /// `recovery-run-create --approval-policy` would loosen the damaged
    /// run's frozen policy: `loosened` says how.
    #[error(
        "the damaged run's frozen approval policy is carried into its recovery run; --approval-policy may only add constraints to it: {loosened}"
    )]
    PolicyLoosened { loosened: String },
}

impl InputRefusal {
    /// What the reason itself teaches (a detail after the message, the
    /// `fields` at fault, the hint), before what the place that refused it
    /// attached.
    pub fn teaching(&self) -> Option<Teaching> {
        match self {
            InputRefusal::Rule(rule) => rule.teaching(),
            InputRefusal::AtInFuture { clock, .. } => Some(Teaching {
                detail: None,
                hint: Some(format!(
                    "give --at as the time the step happened, e.g. --at {clock} (or leave it out for now)"
                )),
                fields: Some(json!({
                    "input": "--at",
                    "invalid": [{"field": "--at", "expected": "a UTC timestamp at most 300 seconds after the clock", "limit": MAX_AT_SKEW_SECONDS}],
                    "clock": clock,
                })),
            }),
            InputRefusal::AtDisagrees { key, at, .. } => Some(Teaching {
                detail: None,
                hint: Some(format!(
                    "the event records one time: leave {key} out of the input (--at fills it) or give it the same instant as --at"
                )),
                fields: Some(json!({
                    "input": "--input",
                    "invalid": [{"field": key, "expected": format!("the --at instant {at}")}],
                })),
            }),
            InputRefusal::NotPublicationRef { under, run_id, .. } => Some(Teaching {
                detail: None,
                hint: Some(format!(
                    "drop --ref to publish onto {under}runs/{run_id}, or name a ref under {under} (e.g. --ref {under}runs/{run_id}); a branch or a tag is never written"
                )),
                fields: Some(json!({"input": "--ref", "expected": format!("a ref under {under}")})),
            }),
            InputRefusal::RefNotCommit { under, .. } => Some(Teaching::hint(format!(
                "a clone does not bring the publications: run git fetch origin '{under}*:{under}*' in it first (a run is published on {under}runs/<run_id>; git for-each-ref {under} lists them)"
            ))),
            InputRefusal::SharedStdin { flags } => Some(Teaching {
                detail: None,
                hint: Some(
                    "give all but one of them inline (the JSON itself, starting with [ or {) or as a file path"
                        .into(),
                ),
                fields: Some(json!({"stdin_flags": flags})),
            }),
            InputRefusal::LeaseTooLong { max, latest } => Some(Teaching {
                detail: Some(format!("at most {max} s after observed_at")),
                hint: latest
                    .as_ref()
                    .map(|l| format!("give silence_lease_deadline at most {l}")),
                fields: Some(json!({"input": "--input", "invalid": [{
                    "field": "silence_lease_deadline",
                    "expected": format!("at most {max} seconds after observed_at"),
                    "limit": max,
                }]})),
            }),
            _ => None,
        }
    }
}

impl From<InputRule> for InputRefusal {
    fn from(rule: InputRule) -> Self {
        InputRefusal::Rule(rule)
    }
}

impl From<InputRefusal> for FlowError {
    fn from(refusal: InputRefusal) -> Self {
        ErrorKind::Input(refusal).into()
    }
}

impl From<InputRule> for FlowError {
    fn from(rule: InputRule) -> Self {
        ErrorKind::Input(InputRefusal::Rule(rule)).into()
    }
}

/// The expected error of a test that names it by its message: the typed
/// reason whose message that is (a fixed rule, or an identifier or
/// timestamp rule about a named field), else the untyped `Contract` of a
/// lower layer's words. Equality then compares the typed reasons.
#[cfg(test)]
pub fn refused_as(message: &str) -> FlowError {
    if let Some(rule) = InputRule::ALL.iter().find(|r| r.message() == message) {
        return FlowError::from(*rule);
    }
    for error in [LaxTimeError::Invalid, LaxTimeError::Naive] {
        if error.message() == message {
            return InputRefusal::LaxTimestamp(error).into();
        }
    }
    if let Some(field) = message.strip_suffix(" must match the identifier contract") {
        return InputRefusal::Identifier {
            field: field.into(),
        }
        .into();
    }
    if let Some(field) = message.strip_suffix(" must be a UTC timestamp") {
        return InputRefusal::Timestamp {
            field: field.into(),
        }
        .into();
    }
    FlowError::contract(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every input refusal is exit 2 `contract_error`, final, with no
    /// `next_command` (contracts/refusals.md "Bad input").
    fn assert_input_class(error: &FlowError) {
        assert_eq!(
            error.classify(),
            (2, "contract_error", false, None),
            "{error:?}"
        );
    }

    #[test]
    fn every_rule_is_exit_2_with_its_own_message() {
        let mut seen = std::collections::BTreeSet::new();
        for rule in InputRule::ALL {
            let error = FlowError::from(*rule);
            assert_input_class(&error);
            assert_eq!(error.message(), rule.message());
            assert!(
                seen.insert(rule.message()),
                "two rules say {:?}",
                rule.message()
            );
            assert_eq!(refused_as(rule.message()), error);
        }
    }

    #[test]
    fn reasons_with_fields_make_the_reference_messages() {
        let cases: Vec<(InputRefusal, &str)> = vec![
            (
                InputRefusal::Identifier {
                    field: "lane id".into(),
                },
                "lane id must match the identifier contract",
            ),
            (
                InputRefusal::Timestamp {
                    field: "decided_at".into(),
                },
                "decided_at must be a UTC timestamp",
            ),
            (
                InputRefusal::LaxTimestamp(LaxTimeError::Invalid),
                "timestamp must be UTC ISO-8601 ending in Z",
            ),
            (
                InputRefusal::LaxTimestamp(LaxTimeError::Naive),
                "timestamp must be timezone-aware",
            ),
            (
                InputRefusal::Sha256 {
                    field: "live_hash".into(),
                },
                "live_hash must be lowercase SHA-256",
            ),
            (
                InputRefusal::DuplicateComponent { id: "api".into() },
                "duplicate component id: api",
            ),
            (
                InputRefusal::UnknownOwnerLane {
                    owner: "ghost".into(),
                },
                "unknown topology owner lane: ghost",
            ),
            (
                InputRefusal::UnknownDependencies {
                    names: vec!["yy".into(), "zz".into()],
                },
                "unknown component dependencies: yy, zz",
            ),
            (
                InputRefusal::MalformedScope {
                    parent: true,
                    rule: "write scope must not contain traversal",
                },
                "parent lane write scope is malformed: write scope must not contain traversal",
            ),
            (
                InputRefusal::MalformedScope {
                    parent: false,
                    rule: "write scope must not contain traversal",
                },
                "write scope is malformed: write scope must not contain traversal",
            ),
            (
                InputRefusal::AtInFuture {
                    at: "2026-07-15T00:00:00Z".into(),
                    clock: "2026-07-14T00:00:00Z".into(),
                },
                "--at must not be in the future: '2026-07-15T00:00:00Z' is more than 300 seconds after this machine's clock (2026-07-14T00:00:00Z)",
            ),
            (
                InputRefusal::AtDisagrees {
                    key: "decided_at".into(),
                    at: "2026-07-14T01:00:00Z".into(),
                    shown: "2026-07-14T02:00:00Z".into(),
                },
                "--at and the input's decided_at disagree: --at '2026-07-14T01:00:00Z', decided_at '2026-07-14T02:00:00Z'",
            ),
            (
                InputRefusal::LeaseTooLong {
                    max: 600,
                    latest: None,
                },
                "silence lease exceeds manifest maximum",
            ),
            (
                InputRefusal::EvidenceRoom {
                    max: 7,
                    signed: false,
                },
                "under an approval policy the evidence may hold at most 7 entries: one more records the decision",
            ),
            (
                InputRefusal::EvidenceRoom {
                    max: 6,
                    signed: true,
                },
                "under a signed approval policy the evidence may hold at most 6 entries: two more record the decision",
            ),
            (
                InputRefusal::SharedStdin {
                    flags: vec!["--input".into(), "--evidence".into()],
                },
                "standard input can feed one JSON option per call, not --input and --evidence",
            ),
            (
                InputRefusal::OtelHeaderValue {
                    origin: "--header".into(),
                    name: "Authorization".into(),
                    max_bytes: 4096,
                },
                "--header: the value of header Authorization must be printable ASCII without line breaks, at most 4096 bytes (the value is not shown)",
            ),
            (
                InputRefusal::OtelProtocol {
                    variable: "OTEL_EXPORTER_OTLP_PROTOCOL".into(),
                    protocol: "grpc".into(),
                },
                "OTEL_EXPORTER_OTLP_PROTOCOL asks for grpc: otel-export sends only http/protobuf",
            ),
            (
                InputRefusal::ApproverIdentity { rule: "an id" },
                "BLUETAPE_APPROVED_BY must be an id",
            ),
            (
                InputRefusal::DiagnosisKey {
                    key: "receipt_sha256".into(),
                },
                "'receipt_sha256'",
            ),
            (
                InputRefusal::DamagedRunField {
                    key: "repo_root".into(),
                },
                "damaged run repo_root is invalid",
            ),
            (
                InputRefusal::PolicyLoosened {
                    loosened: "quorum 1 < 2".into(),
                },
                "the damaged run's frozen approval policy is carried into its recovery run; --approval-policy may only add constraints to it: quorum 1 < 2",
            ),
        ];
        for (reason, message) in cases {
            let error = FlowError::from(reason.clone());
            assert_input_class(&error);
            assert_eq!(error.message(), message);
            assert_eq!(error.to_string(), message);
        }
    }

    /// Equality is of the reason, not of the advice attached to it.
    #[test]
    fn equality_compares_reasons_and_ignores_teaching() {
        let lane = |field: &str| {
            FlowError::from(InputRefusal::Identifier {
                field: field.into(),
            })
        };
        assert_eq!(lane("lane id").hinted("a hint"), lane("lane id"));
        assert_ne!(lane("lane id"), lane("agent id"));
        // Same words in a lower layer's untyped error are another refusal.
        assert_ne!(
            lane("lane id"),
            FlowError::contract("lane id must match the identifier contract")
        );
    }
}
