//! PURE: the JSON inputs of the commands as types, typed to their leaves
//! (agent-tools.md §4, architecture.md §3a). Each input is one serde type
//! (`#[serde(deny_unknown_fields)]`); its JSON Schema, shown by the MCP
//! catalog and the registry, and the keys the decisions check are derived
//! from it (`receipt::schema`), so a key or a limit is spelled once. The
//! leaves' patterns are the rules of `receipt::primitives` and
//! `receipt::scope` written as regular expressions (the unit tests below
//! hold each pattern to its rule). Every object is closed
//! (`additionalProperties: false`), as every decision refuses a key it
//! does not know.
//!
//! What a schema cannot say (deadlines in order, paths inside the lane's
//! scope, a report binding the current head, a decision bound by an
//! evidence checksum) the command checks against the run; those refusals
//! are about the run, never about the shape.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::receipt::faults::EvidenceItem;
use crate::receipt::primitives::{AgentId, Identifier, LaneId, RunId, Sha256Hex};
use crate::receipt::rules::{Component, Limits};
use crate::receipt::schema::{Integer, Rule, leaf_schema, with_rule};

pub use crate::receipt::schema::{IDENTIFIER_PATTERN, SHA256_PATTERN};

/// `receipt::primitives::parse_timestamp`, with [`UtcTimestamp`]'s
/// `"format": "date-time"` (RFC 3339, which makes it a real calendar
/// instant): the stored shape, UTC ending in `Z`, no year 0, no leap
/// second.
pub const TIMESTAMP_PATTERN: &str =
    "^(?!0000)[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-5][0-9](\\.[0-9]+)?Z$";

/// A string with a character that is not white space (the decisions'
/// `non_blank`: Python's `str.isspace`, which also counts U+001C..U+001F).
const NON_BLANK_PATTERN: &str = "[^\\s\\x1c-\\x1f]";

/// The path patterns below are lookaheads over `/`-separated components,
/// valid alike in ECMA-262 (clients) and Python's `re`
/// (hypothesis-jsonschema). `([^/]*/)*` reaches the start of every
/// component; `(?![^/])` is "followed by `/` or the end", in both engines
/// (`$` differs: Python's also matches before a final newline).
///
/// No component is `..`, and the string does not start with `/`.
const NO_TRAVERSAL: &str = "^(?!/)(?!([^/]*/)*\\.\\.(?![^/]))";

/// The rest of a path: one or more characters (so no `minLength` is
/// needed), none of `\ * ? [` and no control character.
const PATH_CHARS: &str = "[^\\\\*?\\[\\x00-\\x1f]+$";

/// A `target_hashes` key (`coordinator::reports::is_target_path`): not
/// starting with `/`, no `..` component, any other character.
pub fn target_path_pattern() -> String {
    NO_TRAVERSAL.to_string()
}

/// `receipt::scope::entry_components` (a `write_scope` entry, before it is
/// canonicalised): relative, no `..` component; `.`, empty components and
/// a trailing `/` are allowed.
pub fn scope_entry_pattern() -> String {
    format!("{NO_TRAVERSAL}{PATH_CHARS}")
}

/// A canonical path (`--changed-paths`): no component is empty, `.` or
/// `..` (so no leading, trailing or doubled `/`).
pub fn canonical_path_pattern() -> String {
    format!("^(?!([^/]*/)*\\.{{0,2}}(?![^/])){PATH_CHARS}")
}

/// `input` as its type, once the reference-ordered checks passed it. The
/// types accept whatever those checks pass, so a failure here is a bug in
/// bluetape-flow and says so (as a caught panic does, `surface`), never a
/// refusal of the input.
pub fn checked_input<T: serde::de::DeserializeOwned>(
    input: &Value,
) -> Result<T, super::decide::FlowError> {
    T::deserialize(input).map_err(|e| {
        super::decide::ErrorKind::Internal(super::decide::Bug::CheckedInputUnreadable(
            e.to_string(),
        ))
        .into()
    })
}

// ---------------------------------------------------------------------------
// The inputs as types. Each limit is the manifest default's
// (`Limits::DEFAULT`), spelled once there: the catalog and the help show
// the defaults, while the decisions check the run's own manifest limits
// (a run may raise them), so no leaf checks a limit when it is read.

/// The default limits the schemas show.
const DEFAULT: Limits = Limits::DEFAULT;

/// A caller's UTC timestamp, as written. The decisions read it as the
/// reference does at each place (strictly, or laxly for a heartbeat and a
/// report), so reading it here checks only that it is text.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct UtcTimestamp(pub String);

/// Text with a character that is not white space, of at most `MAX`
/// characters (the default limit; the decisions check the run's).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct NonBlank<const MAX: u64>(pub String);

/// The non-blank text of an assignment, a fallback or a reason.
pub type Assignment = NonBlank<{ DEFAULT.max_assignment_chars }>;

/// A `write_scope` entry as given, before it is canonicalised.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct ScopeEntry(pub String);

/// A canonical repository path (`lane-complete --changed-paths`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct CanonicalPath(pub String);

/// [`TIMESTAMP_PATTERN`] with `date-time`, in words.
const TIMESTAMP_RULE: Rule = (
    "UTC timestamp ending in Z",
    "UTC timestamp ending in Z (e.g. 2026-07-14T01:00:02Z), a real calendar instant",
);

/// [`scope_entry_pattern`] in words.
const SCOPE_ENTRY_RULE: Rule = (
    "relative path",
    "relative path (not starting with /, no .. component, no \\ * ? [ or control characters)",
);

/// [`canonical_path_pattern`] in words.
const CANONICAL_PATH_RULE: Rule = (
    "canonical path",
    "canonical relative path (no leading / or ./, no trailing /, no //, no . or .. component, no \\ * ? [ or control characters)",
);

leaf_schema! {
    UtcTimestamp => {"type": "string", "format": "date-time", "pattern": TIMESTAMP_PATTERN},
        TIMESTAMP_RULE;
    ScopeEntry => {"type": "string", "maxLength": DEFAULT.max_evidence_path_chars,
        "pattern": scope_entry_pattern()}, SCOPE_ENTRY_RULE;
    CanonicalPath => {"type": "string", "maxLength": DEFAULT.max_evidence_path_chars,
        "pattern": canonical_path_pattern()}, CANONICAL_PATH_RULE;
}

impl<const MAX: u64> JsonSchema for NonBlank<MAX> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        format!("NonBlank{MAX}").into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // The pattern wants a character, so no `minLength`.
        let schema = schemars::json_schema!({"type": "string", "maxLength": MAX, "pattern": NON_BLANK_PATTERN});
        with_rule(schema, ("non-blank", "non-blank"))
    }
}

/// `--evidence`: 1 to `max_evidence_refs` items (a step always needs some).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct Evidence(
    #[schemars(length(min = 1, max = DEFAULT.max_evidence_refs))] pub Vec<EvidenceItem>,
);

/// `lane-complete --changed-paths`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct ChangedPaths(
    #[schemars(length(max = DEFAULT.max_write_scopes), extend("uniqueItems" = true))]
    pub  Vec<CanonicalPath>,
);

/// `lane-create --input` (reference-coordinator §5).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
// A field's doc comment is its prose in the help's field table (after the
// type and rules the schema gives; `surface::help`), so it speaks to the
// caller; notes for the reader of this code are plain comments.
pub struct LaneCreateInput {
    /// The new lane's id; must not exist yet in this run.
    pub lane_id: LaneId,
    /// The agent that owns the lane.
    pub agent_id: AgentId,
    /// What the lane must do.
    pub assignment: Assignment,
    /// Paths under the run's repo root, with no symlinked component;
    /// canonicalised ("./docs", "src/" and "src" become "docs", "src";
    /// duplicates dropped). An empty list means the lane may change
    /// nothing.
    #[schemars(length(max = DEFAULT.max_write_scopes))]
    pub write_scope: Vec<ScopeEntry>,
    /// Who takes over if the lane fails (e.g. "main session").
    pub fallback: Assignment,
    /// When the lane was created.
    pub observed_at: UtcTimestamp,
    /// After observed_at. By when startup-ack is expected (liveness-check
    /// suspects a stall after it).
    pub startup_ack_deadline: UtcTimestamp,
    /// Not before startup_ack_deadline. The lane's overall deadline;
    /// heartbeat leases may not go past it.
    pub command_deadline: UtcTimestamp,
    /// The lane this one continues or corrects (required by lane-resolve
    /// for the resolver); null for a lane of the run's own.
    #[serde(default)]
    #[schemars(schema_with = "null_or_identifier")]
    pub parent_lane_id: Option<LaneId>,
    /// How many replacements led to this lane; at 1 (the manifest's
    /// max_replacements) a stalled lane goes to main_takeover instead of
    /// interrupt.
    // Absent: 0, which the help shows as its default.
    #[serde(default)]
    #[schemars(with = "Integer", range(min = 0), extend("default" = 0))]
    pub replacement_count: Option<Integer>,
}

/// An input whose event time is one of its keys: `--at` fills it when the
/// input leaves it out, and must otherwise equal it (cli-conventions §5
/// "One clock"). The command binds that key and the help says it is
/// required "unless --at gives it", both from here.
pub trait TimedInput {
    /// The key holding the event's time.
    const AT_KEY: &'static str;
}

impl TimedInput for LaneCreateInput {
    const AT_KEY: &'static str = "observed_at";
}

impl TimedInput for HeartbeatInput {
    const AT_KEY: &'static str = "observed_at";
}

impl TimedInput for ReassignInput {
    const AT_KEY: &'static str = "decided_at";
}

/// `{"anyOf": [an identifier, null]}`.
fn null_or_identifier(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"anyOf": [generator.subschema_for::<LaneId>(), {"type": "null"}]})
}

/// `heartbeat --input` (reference-coordinator §6.4).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatInput {
    /// The running lane.
    pub lane_id: LaneId,
    /// Must be the lane's agent.
    pub agent_id: AgentId,
    /// When the progress was observed.
    pub observed_at: UtcTimestamp,
    /// After observed_at, at most 600 seconds after it (the manifest's
    /// max_silence_lease_seconds) and not after the lane's
    /// command_deadline. Until when silence is expected.
    pub silence_lease_deadline: UtcTimestamp,
    /// What the progress is.
    // As given: the decision refuses one that is not non-blank text in
    // the reference's place, after the lane's checks.
    #[schemars(with = "Assignment")]
    pub reason: Value,
}

/// What a replacement assignment must name (any case).
const CHECKPOINT_PATTERN: &str = "[Cc][Hh][Ee][Cc][Kk][Pp][Oo][Ii][Nn][Tt]";

/// `lane-reassign --input` (reference-coordinator §8).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReassignInput {
    /// The original lane: recovering, with interrupt-result as its last
    /// event.
    pub lane_id: LaneId,
    /// Different from lane_id and not yet used in the run. The new lane.
    pub replacement_lane_id: LaneId,
    /// Different from the original lane's agent. The new agent.
    pub replacement_agent_id: AgentId,
    /// When the replacement was decided.
    pub decided_at: UtcTimestamp,
    /// Non-blank and different from the original assignment.
    // Names the recovered checkpoint (so at least its 10 characters).
    #[schemars(
        length(min = 10, max = DEFAULT.max_assignment_chars),
        pattern(CHECKPOINT_PATTERN),
        extend("x-rule" = "containing \"checkpoint\" (any case)")
    )]
    pub replacement_assignment: String,
    /// Each equal to or below an entry of the original's scope (the rules
    /// of lane-create's write_scope, canonicalised); an empty list is
    /// always allowed.
    #[schemars(length(max = DEFAULT.max_write_scopes))]
    pub replacement_write_scope: Vec<ScopeEntry>,
    /// After decided_at.
    pub replacement_startup_ack_deadline: UtcTimestamp,
    /// Not before replacement_startup_ack_deadline.
    pub replacement_command_deadline: UtcTimestamp,
}

/// `stall-record --decision`: the decision `liveness-check` printed. The
/// decision binds the object as given (its checksum), so this type is its
/// schema and keys only.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StallDecision {
    #[schemars(schema_with = "suspect_stall")]
    pub action: String,
    /// The reason liveness-check gave at --at with command status unknown:
    /// the first for a running lane, the second for a starting one.
    #[schemars(schema_with = "stall_reason")]
    pub reason: String,
}

fn suspect_stall(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"const": "suspect_stall"})
}

fn stall_reason(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"enum": ["no fresh evidence", "startup ACK deadline elapsed"]})
}

/// `check-result --input` (reference-coordinator §10.3).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckResultInput {
    /// A registered component.
    pub component_id: Identifier,
    /// One of the component's required_checks.
    pub check_id: Identifier,
    /// Whether the check passed.
    pub passed: bool,
    /// Required (non-blank) when a failed check now passes.
    // As given, absent = null: the decision refuses a reason that is not
    // text or null where the reference does.
    #[serde(default)]
    #[schemars(with = "Option<String>", length(max = DEFAULT.max_assignment_chars))]
    pub reason: Value,
}

/// `component-evidence --input` (reference-coordinator §10.4).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComponentEvidenceInput {
    /// A registered component.
    pub component_id: Identifier,
}

/// `init --approval-policy` and `recovery-run-create --approval-policy`:
/// the approver policy a person freezes into a new run
/// (contracts/approvals.md). The policy is read by
/// `coordinator::approval::ApprovalPolicy::from_input`, whose refusals name
/// the rule an input breaks (and the rules across keys: not vacuous, four
/// eyes need an initiator); this type is its schema and keys, held to that
/// reader by the unit tests.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalPolicyInput {
    /// Only this identity may run-approve.
    pub required_approver: Option<ApproverIdentity>,
    /// Four eyes: the initiator may not approve. Needs an initiator, and
    /// must not make the required approver the initiator.
    pub require_different_approver: Option<bool>,
    /// Who asked for the approval; may instead come from the environment
    /// variable BLUETAPE_INITIATED_BY (trimmed, blank = unset); if both are
    /// given they must agree.
    pub initiated_by: Option<ApproverIdentity>,
    /// The approver must also present a credential file whose token hashes
    /// (SHA-256) to this. Not together with approver_key.
    pub approver_fingerprint: Option<Sha256Hex>,
    /// Approvals must then be SSH signatures by this key of the statement
    /// approval-statement writes (run-approve --signature).
    pub approver_key: Option<ApproverKey>,
    /// The approval window in seconds, counted from run_created.
    #[schemars(range(min = 1, max = crate::coordinator::approval::MAX_EXPIRES_AFTER_S))]
    pub expires_after_s: Option<u64>,
}

/// Who approves or initiates: `coordinator::approval::is_approver_identity`.
#[derive(Debug, Clone, Deserialize)]
pub struct ApproverIdentity(pub String);

/// An OpenSSH `ssh-ed25519` public key line
/// (`coordinator::signed::canonical_key`).
#[derive(Debug, Clone, Deserialize)]
pub struct ApproverKey(pub String);

/// [`ApproverIdentity`]'s rule as a pattern.
pub const APPROVER_IDENTITY_PATTERN: &str = "^[A-Za-z0-9._@-]{1,128}$";

leaf_schema! {
    ApproverIdentity => {"type": "string", "pattern": APPROVER_IDENTITY_PATTERN},
        ("approver identity", "approver identity (1-128 characters of [A-Za-z0-9._@-])");
    ApproverKey => {"type": "string"},
        ("OpenSSH ssh-ed25519 public key line", "OpenSSH ssh-ed25519 public key line");
}

/// `recovery-run-create --input`: the `receipt-diagnose` output of the
/// damaged run, passed back as printed. It is compared with a fresh
/// diagnosis (`coordinator::recovery`), so this type is its schema and
/// keys only (the help's table); a test holds it to what receipt-diagnose
/// prints for a damaged run.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecoveryDiagnosisInput {
    /// A damaged receipt.
    #[schemars(schema_with = "blocked")]
    pub effective_state: String,
    /// Where the damage begins.
    #[schemars(range(min = 1))]
    pub first_bad_sequence: u64,
    pub last_trusted_sequence: u64,
    /// Or "" when last_trusted_sequence is 0.
    #[schemars(schema_with = "trusted_checksum")]
    pub last_trusted_checksum: String,
    /// The damaged run's id.
    pub run_id: RunId,
    pub manifest_version: String,
    pub manifest_hash: Sha256Hex,
    /// E.g. "unlocked"; a live writer ("locked_alive") is waited for.
    pub lock_owner_status: String,
    /// The damaged file's SHA-256.
    pub receipt_hash: Sha256Hex,
    /// The damaged file's size in bytes.
    pub receipt_size: u64,
    /// Why the head record was not used, when it could not be read.
    pub head_record_finding: Option<String>,
    /// The SHA-256 of the canonical JSON of the other fields; computed when
    /// absent.
    pub diagnosis_checksum: Option<Sha256Hex>,
    /// Ignored, like operation and state_root (so the stdout of
    /// receipt-diagnose can be passed as it is).
    pub ok: Option<bool>,
    /// Ignored.
    pub operation: Option<String>,
    /// Ignored.
    pub state_root: Option<String>,
}

fn blocked(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"const": "blocked"})
}

fn trusted_checksum(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"anyOf": [generator.subschema_for::<Sha256Hex>(), {"const": ""}]})
}

/// `topology-register --input`: the approved components.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct Topology(#[schemars(length(min = 1, max = DEFAULT.max_components))] pub Vec<Component>);

/// Most `target_hashes` entries, `command_ids` and `timestamps` a report
/// may list, and the longest target path and command id.
pub const MAX_REPORT_TARGETS: usize = 64;
pub const MAX_REPORT_COMMANDS: usize = 64;
pub const MAX_TARGET_PATH_CHARS: usize = 256;
pub const MAX_COMMAND_ID_CHARS: usize = 128;

/// `{target path: SHA-256}`.
fn target_hashes(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let schema = schemars::json_schema!({"type": "object", "maxProperties": MAX_REPORT_TARGETS,
        "propertyNames": {"minLength": 1, "maxLength": MAX_TARGET_PATH_CHARS, "pattern": target_path_pattern()},
        "additionalProperties": generator.subschema_for::<Sha256Hex>()});
    let rule = format!(
        "each key a relative path (1 to {MAX_TARGET_PATH_CHARS} characters, not starting with /, no .. component) mapped to 64 lowercase hex"
    );
    with_rule(schema, (&rule, &rule))
}

/// A report type: the handoff's keys, then `$extra` ones. A report is
/// stored as the canonical bytes of the object given, so these types are
/// its schema and keys (`coordinator::reports::validate_report_payload`
/// checks it).
macro_rules! report {
    ($(#[$doc:meta])* $name:ident { $($extra:tt)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            pub agents_hash: Sha256Hex,
            pub canonical_sha: Sha256Hex,
            /// The run's manifest hash (resume-check prints it).
            pub manifest_hash: Sha256Hex,
            /// The current owner epoch.
            #[schemars(range(min = 1))]
            pub owner_epoch: Integer,
            /// The current receipt head (the checksum verify prints); the
            /// report binds it.
            pub receipt_head: Sha256Hex,
            /// This run's id.
            // Bound to the run later; any text here.
            #[schemars(with = "RunId")]
            pub run_id: String,
            pub skill_hash: Sha256Hex,
            /// An empty object is allowed.
            #[schemars(schema_with = "target_hashes")]
            pub target_hashes: std::collections::BTreeMap<String, Sha256Hex>,
            $($extra)*
        }
    };
}

report!(
    /// `handoff-create --input`.
    HandoffReport {}
);

report!(
    /// `live-report-create --input`.
    LiveReport {
        /// The live commands that ran.
        #[schemars(length(min = 1, max = MAX_REPORT_COMMANDS), inner(length(min = 1, max = MAX_COMMAND_ID_CHARS)))]
        pub command_ids: Vec<String>,
        /// Evidence items, each with the rules of an --evidence item; an
        /// empty list is allowed.
        #[schemars(length(max = DEFAULT.max_evidence_refs))]
        pub evidence_refs: Vec<EvidenceItem>,
        /// The live apply's exit status.
        pub exit_status: Integer,
        pub live_hash: Sha256Hex,
        pub rendered_hash: Sha256Hex,
        pub source_hash: Sha256Hex,
        /// As many as command_ids (read leniently). When each command ran.
        #[schemars(length(min = 1, max = MAX_REPORT_COMMANDS))]
        pub timestamps: Vec<UtcTimestamp>,
    }
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::primitives::{is_identifier, is_sha256_hex, parse_timestamp};
    use serde_json::json;

    /// Every typed input's schema, named.
    fn input_schemas() -> Vec<(&'static str, Value)> {
        use crate::receipt::schema::schema_of;
        vec![
            ("evidence", schema_of::<Evidence>()),
            ("changed paths", schema_of::<ChangedPaths>()),
            ("lane-create", schema_of::<LaneCreateInput>()),
            ("heartbeat", schema_of::<HeartbeatInput>()),
            ("lane-reassign", schema_of::<ReassignInput>()),
            ("stall decision", schema_of::<StallDecision>()),
            ("check-result", schema_of::<CheckResultInput>()),
            ("component-evidence", schema_of::<ComponentEvidenceInput>()),
            ("topology", schema_of::<Topology>()),
            ("handoff", schema_of::<HandoffReport>()),
            ("live report", schema_of::<LiveReport>()),
        ]
    }

    /// A search, as JSON Schema's `pattern` is; fancy-regex has the
    /// lookahead the regex crate lacks.
    fn matches(pattern: &str, text: &str) -> bool {
        fancy_regex::Regex::new(pattern)
            .unwrap()
            .is_match(text)
            .unwrap()
    }

    #[test]
    fn the_patterns_are_the_rules() {
        for id in [
            "a",
            "A-1.b_c",
            &"x".repeat(128),
            "",
            "-a",
            "a b",
            &"x".repeat(129),
            "é",
        ] {
            assert_eq!(matches(IDENTIFIER_PATTERN, id), is_identifier(id), "{id}");
        }
        for identity in [
            "a",
            "-a",
            "alice@example.org",
            "a b",
            "",
            "é",
            &"x".repeat(129),
        ] {
            assert_eq!(
                matches(APPROVER_IDENTITY_PATTERN, identity),
                crate::coordinator::approval::is_approver_identity(identity),
                "{identity}"
            );
        }
        for hex in [
            &"a".repeat(64),
            &"A".repeat(64),
            &"a".repeat(63),
            &"0".repeat(65),
        ] {
            assert_eq!(matches(SHA256_PATTERN, hex), is_sha256_hex(hex), "{hex}");
        }
        for year in [0, 1, 4, 100, 400, 1900, 2000, 2024, 2026, 9996, 9999] {
            for month in 1..=12 {
                for day in [1, 28, 29, 30, 31] {
                    for time in [
                        "00:00:00",
                        "23:59:59.123456789",
                        "24:00:00",
                        "12:60:00",
                        "23:59:60",
                    ] {
                        let at = format!("{year:04}-{month:02}-{day:02}T{time}Z");
                        // The pattern and RFC 3339's date-time together.
                        let schema = matches(TIMESTAMP_PATTERN, &at)
                            && chrono::DateTime::parse_from_rfc3339(&at).is_ok();
                        assert_eq!(schema, parse_timestamp(&at).is_some(), "{at}");
                    }
                }
            }
        }
        let limits = Limits::default();
        for entry in [
            "src", "src/", "./docs", "a//b", ".", "..", "a/../b", "a/..", "../a", "/abs", "a\\b",
            "a*", "a?", "a[", "a\tb", "...", "..x/y", ".hidden",
        ] {
            let rule = crate::receipt::scope::entry_components(
                &json!(entry),
                limits.max_evidence_path_chars,
            )
            .is_ok();
            assert_eq!(matches(&scope_entry_pattern(), entry), rule, "{entry}");
        }
        for path in [
            "src/a.rs", "src/", "./a", "a//b", ".", "a/./b", "..x", ".h/x",
        ] {
            let value = json!(path);
            let components =
                crate::receipt::scope::entry_components(&value, limits.max_evidence_path_chars);
            let canonical = components
                .is_ok_and(|c| crate::receipt::scope::join_components(&c) == path && path != ".");
            assert_eq!(
                matches(&canonical_path_pattern(), path),
                canonical,
                "{path}"
            );
        }
        for key in [
            "a", "a/b", "./x", "a//b", "/a", "..", "a/..", "...", "x\ty", "",
        ] {
            // With the schema's `minLength: 1`.
            assert_eq!(
                !key.is_empty() && matches(&target_path_pattern(), key),
                super::super::reports::is_target_path(key),
                "{key}"
            );
        }
    }

    /// Every string of up to five characters from an alphabet with each
    /// character the path rules name: the path patterns say exactly what
    /// the rules say (the target path pattern with `minLength: 1`, as its
    /// schema has it; the others refuse "" themselves).
    #[test]
    fn the_path_patterns_are_the_rules_on_every_short_string() {
        let limits = Limits::default();
        let alphabet = ['a', '.', '/', '\\', '*', '\n', '\u{7f}', 'é'];
        assert!(!matches(&scope_entry_pattern(), ""));
        assert!(!matches(&canonical_path_pattern(), ""));
        assert!(!matches(NON_BLANK_PATTERN, ""));
        let mut strings = vec![String::new()];
        let regex = |pattern: String| fancy_regex::Regex::new(&pattern).unwrap();
        let (scope, canonical_path, target) = (
            regex(scope_entry_pattern()),
            regex(canonical_path_pattern()),
            regex(target_path_pattern()),
        );
        let mut checked = 0usize;
        for _ in 0..5 {
            strings = strings
                .iter()
                .flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}")))
                .collect();
            for path in &strings {
                let value = json!(path);
                let components =
                    crate::receipt::scope::entry_components(&value, limits.max_evidence_path_chars);
                let canonical = components.as_ref().is_ok_and(|c| {
                    crate::receipt::scope::join_components(c) == *path && path != "."
                });
                let hit = |regex: &fancy_regex::Regex| regex.is_match(path).unwrap();
                assert_eq!(hit(&scope), components.is_ok(), "{path:?}");
                assert_eq!(hit(&canonical_path), canonical, "{path:?}");
                assert_eq!(
                    hit(&target),
                    super::super::reports::is_target_path(path),
                    "{path:?}"
                );
                checked += 1;
            }
        }
        assert_eq!(
            checked,
            (1..=5).map(|n| alphabet.len().pow(n)).sum::<usize>()
        );
    }

    /// Every input's schema, as the catalog shows it, byte for byte: a
    /// change to a type that changes its schema shows here (the catalog's
    /// size is held in tests/it/mcp.rs).
    #[test]
    fn the_schemas_are_pinned() {
        let text: Vec<String> = input_schemas()
            .into_iter()
            .map(|(name, schema)| format!("{name}: {schema}"))
            .collect();
        insta::assert_snapshot!("input_schemas", text.join("\n"));
    }

    /// The keys the decisions check are the types' fields, in the order
    /// the reference lists them (its refusals name them so).
    #[test]
    fn the_keys_are_the_types_fields() {
        use crate::receipt::schema::InputKeys;
        let keys = |required: &[&'static str], optional: &[&'static str]| InputKeys {
            required: required.to_vec(),
            optional: optional.to_vec(),
        };
        let lane = [
            "lane_id",
            "agent_id",
            "assignment",
            "write_scope",
            "fallback",
            "observed_at",
            "startup_ack_deadline",
            "command_deadline",
        ];
        let optional = ["parent_lane_id", "replacement_count"];
        assert_eq!(InputKeys::of::<LaneCreateInput>(), keys(&lane, &optional));
        let heartbeat = [
            "lane_id",
            "agent_id",
            "observed_at",
            "silence_lease_deadline",
            "reason",
        ];
        assert_eq!(InputKeys::of::<HeartbeatInput>(), keys(&heartbeat, &[]));
        let reassign = [
            "lane_id",
            "replacement_lane_id",
            "replacement_agent_id",
            "decided_at",
            "replacement_assignment",
            "replacement_write_scope",
            "replacement_startup_ack_deadline",
            "replacement_command_deadline",
        ];
        assert_eq!(InputKeys::of::<ReassignInput>(), keys(&reassign, &[]));
        assert_eq!(
            InputKeys::of::<CheckResultInput>(),
            keys(&["component_id", "check_id", "passed"], &["reason"])
        );
        assert_eq!(
            InputKeys::of::<ComponentEvidenceInput>(),
            keys(&["component_id"], &[])
        );
        let mut component = [
            "coverage_state",
            "dependencies",
            "description",
            "evidence_refs",
            "id",
            "owner_lane",
            "required",
            "required_checks",
        ];
        assert_eq!(InputKeys::of::<Component>(), keys(&component, &[]));
        component.sort_unstable();
        assert_eq!(InputKeys::of::<Component>().required, component, "sorted");
        assert_eq!(
            InputKeys::of::<EvidenceItem>(),
            keys(&["kind", "summary"], &["path", "checksum", "exit_status"])
        );
        let handoff = [
            "agents_hash",
            "canonical_sha",
            "manifest_hash",
            "owner_epoch",
            "receipt_head",
            "run_id",
            "skill_hash",
            "target_hashes",
        ];
        assert_eq!(InputKeys::of::<HandoffReport>(), keys(&handoff, &[]));
        let live_extra = [
            "command_ids",
            "evidence_refs",
            "exit_status",
            "live_hash",
            "rendered_hash",
            "source_hash",
            "timestamps",
        ];
        let live: Vec<&str> = handoff.iter().chain(&live_extra).copied().collect();
        assert_eq!(InputKeys::of::<LiveReport>(), keys(&live, &[]));
        assert!(
            InputKeys::of::<Evidence>().all().is_empty(),
            "a list has no keys"
        );
    }

    /// What the decisions' checks pass, the types read: the laxest
    /// values each check lets through (lax timestamps, a reason of any
    /// type where the decision refuses it later, integers of any size).
    #[test]
    fn the_types_read_what_the_checks_pass() {
        let huge = serde_json::from_str::<Value>("100000000000000000000000000000").unwrap();
        let evidence = json!([{"kind": "log", "summary": "", "path": "a", "checksum": "a".repeat(64), "exit_status": huge}]);
        let read = serde_json::from_value::<Evidence>(evidence.clone()).unwrap();
        let status = read.0[0].exit_status.as_ref().unwrap();
        assert_eq!(status.0.to_string(), "100000000000000000000000000000");
        serde_json::from_value::<HeartbeatInput>(json!({"lane_id": "a", "agent_id": "b",
            "observed_at": "2026-07-14T01:00Z", "silence_lease_deadline": "2026-07-14", "reason": 7}))
        .unwrap();
        serde_json::from_value::<CheckResultInput>(json!({"component_id": "a", "check_id": "b",
            "passed": true, "reason": [1]}))
        .unwrap();
        serde_json::from_value::<LaneCreateInput>(json!({"lane_id": "a", "agent_id": "b",
            "assignment": "x", "write_scope": ["./src//a/"], "fallback": "y",
            "observed_at": "2026-07-14T01:00:00Z", "startup_ack_deadline": "2026-07-14T01:00:01Z",
            "command_deadline": "2026-07-14T01:00:01Z", "parent_lane_id": null, "replacement_count": huge}))
        .unwrap();
        let hash = "0".repeat(64);
        serde_json::from_value::<LiveReport>(json!({"agents_hash": hash, "canonical_sha": hash,
            "manifest_hash": hash, "owner_epoch": huge, "receipt_head": hash, "run_id": "r",
            "skill_hash": hash, "target_hashes": {"a/b": hash}, "command_ids": ["c"],
            "evidence_refs": evidence, "exit_status": -1, "live_hash": hash, "rendered_hash": hash,
            "source_hash": hash, "timestamps": ["2026-07-14"]}))
        .unwrap();
        assert!(serde_json::from_value::<HeartbeatInput>(json!({"lane_id": "a"})).is_err());
    }

    /// Every object of every input is closed (as every decision refuses
    /// a key it does not know) and lists every key it requires.
    #[test]
    fn every_object_is_closed() {
        fn objects(schema: &Value, found: &mut usize) {
            match schema {
                Value::Object(map) if map.get("type") == Some(&json!("object")) => {
                    *found += 1;
                    let properties = map.get("properties").and_then(Value::as_object);
                    if let Some(properties) = properties {
                        assert_eq!(map["additionalProperties"], false, "{schema}");
                        for key in map["required"].as_array().unwrap() {
                            assert!(properties.contains_key(key.as_str().unwrap()), "{key}");
                        }
                    }
                    map.values().for_each(|v| objects(v, found));
                }
                Value::Object(map) => map.values().for_each(|v| objects(v, found)),
                Value::Array(items) => items.iter().for_each(|v| objects(v, found)),
                _ => {}
            }
        }
        let mut found = 0;
        for (_, schema) in input_schemas() {
            objects(&schema, &mut found);
        }
        assert!(found >= 11, "{found}");
    }
}
