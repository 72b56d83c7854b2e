//! The approval gate (our extension; `contracts/approvals.md`): a frozen
//! approver policy, the identity rules of `run-approve`, the deny record of
//! `run-cancel`, and the fold that reads approvals back from a receipt.
//!
//! Pure: no I/O, no clock. The policy file, the approver credential and the
//! environment are read by the commands layer and arrive here as values.
//!
//! Everything the gate records travels in *evidence items* (`kind`,
//! `summary`, `path`, `checksum`), never in new metadata keys, so a receipt
//! with a policy still verifies under the reference's rules.

use crate::receipt::json_ref::{JsonRef, ObjectRef};
use crate::receipt::vocab::EventType;
use serde_json::{Map, Value, json};

use super::breach::Breach;
use super::decide::{ErrorKind, FlowError, Intent, invalid, require_evidence};
use super::decide::{InputRefusal, InputRule};
use super::inputs::ApprovalPolicyInput;
use super::run_commands::{RunCommand, decide_run_transition};
use super::state::{CoordinatorState, RunState};
use crate::receipt::canonical;
use crate::receipt::primitives::{Instant, as_int, is_sha256_hex, parse_timestamp};
use crate::receipt::rules::Limits;
use crate::receipt::schema::keys_of;

pub use crate::receipt::vocab::POLICY_FILE;
/// Evidence kind of the policy binding on `run_created`.
pub const POLICY_KIND: &str = "approval_policy";
/// Evidence kind of the decision record on `plan_approved` / `run_cancelled`.
pub const IDENTITY_KIND: &str = "approver_identity";

/// The longest approval window a policy may ask for (ten years).
pub const MAX_EXPIRES_AFTER_S: u64 = 315_360_000;

const IDENTITY_RULE: &str = "an approver identity ([A-Za-z0-9._@-], 1-128 characters)";

/// `[A-Za-z0-9._@-]{1,128}`.
pub fn is_approver_identity(text: &str) -> bool {
    (1..=128).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'-'))
}

/// An identity as it may appear in a message: the allowed characters kept,
/// anything else shown as `?`, at most 128 characters.
fn shown(text: &str) -> String {
    text.chars()
        .take(128)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '-') {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// Who tried, for a refusal message.
fn who(identity: Option<&str>) -> String {
    match identity {
        Some(id) => format!("'{}'", shown(id)),
        None => "an unidentified caller".to_string(),
    }
}

/// Why the gate refuses; each maps to one exit status and error code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalRefusal {
    /// The caller may not approve (exit 2 `approval_refused`, final).
    Refused(String),
    /// The approval window is over (exit 5 `approval_expired`, final).
    Expired(String),
    /// The approval was already used or the request was denied (exit 5
    /// `coordinator_conflict`, final).
    Consumed(String),
    /// The frozen policy or the receipt cannot be trusted (exit 3
    /// `receipt_corrupt`).
    Corrupt(String),
}

impl ApprovalRefusal {
    pub fn message(&self) -> &str {
        match self {
            ApprovalRefusal::Refused(m)
            | ApprovalRefusal::Expired(m)
            | ApprovalRefusal::Consumed(m)
            | ApprovalRefusal::Corrupt(m) => m,
        }
    }
}

fn refused<T>(message: String) -> Result<T, FlowError> {
    Err(ErrorKind::Approval(ApprovalRefusal::Refused(message)).into())
}

/// A validated approver policy. Serialised, it is the canonical policy:
/// five keys with `null` for absent values, plus `approver_key` only when
/// set. (It is read by [`ApprovalPolicy::from_input`], whose refusals name
/// the rule an input breaks.)
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ApprovalPolicy {
    pub required_approver: Option<String>,
    pub require_different_approver: bool,
    pub initiated_by: Option<String>,
    pub approver_fingerprint: Option<String>,
    /// An OpenSSH `ssh-ed25519` public key line (canonical form): approvals
    /// must be signed with it (see [`super::signed`]). Serialised only when
    /// set, so the checksums of policies frozen before it existed stay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approver_key: Option<String>,
    pub expires_after_s: Option<u64>,
}

fn identity_field(map: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if is_approver_identity(text) => Ok(Some(text.clone())),
        Some(_) => Err(format!("{key} must be {IDENTITY_RULE}")),
    }
}

impl ApprovalPolicy {
    /// Whether this policy only adds constraints to `carried` (a recovery
    /// run's `--approval-policy` over the source's proven gate,
    /// contracts/approvals.md "Recovery"): every constraint `carried` sets
    /// is kept — the same `required_approver`, `initiated_by`,
    /// `approver_fingerprint` and `approver_key`, `require_different_approver`
    /// still true, an `expires_after_s` no longer than carried's — and a
    /// constraint `carried` leaves open may be set. The refusal names the
    /// first constraint it would loosen.
    pub fn adds_to(&self, carried: &ApprovalPolicy) -> Result<(), String> {
        fn same(key: &str, carried: &Option<String>, fresh: &Option<String>) -> Result<(), String> {
            match carried {
                Some(c) if fresh.as_ref() != Some(c) => Err(format!(
                    "{key} must stay {}",
                    if key == "approver_key" {
                        "the carried key".to_string()
                    } else {
                        format!("'{}'", shown(c))
                    }
                )),
                _ => Ok(()),
            }
        }
        same(
            "required_approver",
            &carried.required_approver,
            &self.required_approver,
        )?;
        same("initiated_by", &carried.initiated_by, &self.initiated_by)?;
        same(
            "approver_fingerprint",
            &carried.approver_fingerprint,
            &self.approver_fingerprint,
        )?;
        same("approver_key", &carried.approver_key, &self.approver_key)?;
        if carried.require_different_approver && !self.require_different_approver {
            return Err("require_different_approver must stay true".into());
        }
        if let Some(limit) = carried.expires_after_s
            && self.expires_after_s.is_none_or(|n| n > limit)
        {
            return Err(format!("expires_after_s must stay at most {limit}"));
        }
        Ok(())
    }

    /// Validate a policy input object. `env_initiator` is
    /// `BLUETAPE_INITIATED_BY` (already trimmed; `None` when unset or blank).
    /// Vacuous and unsatisfiable policies are refused.
    pub fn from_input(
        value: &Value,
        env_initiator: Option<&str>,
    ) -> Result<ApprovalPolicy, String> {
        let Value::Object(map) = value else {
            return Err("approval policy must be a JSON object".into());
        };
        // The policy's keys are its type's (`ApprovalPolicyInput`, the
        // help's table); anything else is a contract error.
        let known = keys_of!(ApprovalPolicyInput).all();
        let mut unknown: Vec<&str> = map
            .keys()
            .map(String::as_str)
            .filter(|k| !known.contains(k))
            .collect();
        if !unknown.is_empty() {
            unknown.sort_unstable();
            let names: Vec<String> = unknown.iter().take(8).map(|k| shown(k)).collect();
            return Err(format!(
                "approval policy contains unsupported fields: {}",
                names.join(", ")
            ));
        }
        if map.is_empty() {
            return Err("approval policy must not be empty".into());
        }
        let required_approver = identity_field(map, "required_approver")?;
        let mut initiated_by = identity_field(map, "initiated_by")?;
        let require_different_approver = match map.get("require_different_approver") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err("require_different_approver must be true or false".into()),
        };
        let approver_fingerprint = match map.get("approver_fingerprint") {
            None | Some(Value::Null) => None,
            Some(Value::String(f)) if is_sha256_hex(f) => Some(f.clone()),
            Some(_) => return Err("approver_fingerprint must be lowercase SHA-256".into()),
        };
        let approver_key = match map.get("approver_key") {
            None | Some(Value::Null) => None,
            Some(Value::String(line)) => Some(super::signed::canonical_key(line)?),
            Some(_) => return Err("approver_key must be an OpenSSH public key line".into()),
        };
        if approver_key.is_some() && approver_fingerprint.is_some() {
            return Err(
                "approval policy pins either an approver_fingerprint or an approver_key, not both"
                    .into(),
            );
        }
        let expires_after_s = match map.get("expires_after_s") {
            None | Some(Value::Null) => None,
            Some(v @ Value::Number(_)) => match as_int(v) {
                Some(n) if n >= 1 && n <= i128::from(MAX_EXPIRES_AFTER_S) => Some(n as u64),
                _ => {
                    return Err(format!(
                        "expires_after_s must be a positive integer of at most {MAX_EXPIRES_AFTER_S} seconds"
                    ));
                }
            },
            Some(_) => {
                return Err(format!(
                    "expires_after_s must be a positive integer of at most {MAX_EXPIRES_AFTER_S} seconds"
                ));
            }
        };
        if let Some(env) = env_initiator {
            if !is_approver_identity(env) {
                return Err(format!("BLUETAPE_INITIATED_BY must be {IDENTITY_RULE}"));
            }
            match &initiated_by {
                Some(stated) if stated != env => {
                    return Err(format!(
                        "initiated_by '{stated}' in the approval policy disagrees with BLUETAPE_INITIATED_BY '{env}'"
                    ));
                }
                _ => initiated_by = Some(env.to_string()),
            }
        }
        if require_different_approver && initiated_by.is_none() {
            return Err(
                "require_different_approver needs an initiator: set initiated_by or BLUETAPE_INITIATED_BY"
                    .into(),
            );
        }
        if require_different_approver
            && let (Some(approver), Some(initiator)) = (&required_approver, &initiated_by)
            && approver == initiator
        {
            return Err(format!(
                "required_approver '{approver}' is the initiator and require_different_approver is on: nobody could approve"
            ));
        }
        if required_approver.is_none()
            && !require_different_approver
            && approver_fingerprint.is_none()
            && approver_key.is_none()
            && expires_after_s.is_none()
        {
            return Err("approval policy is vacuous: it must name a required_approver, require a different approver, pin an approver_fingerprint or set expires_after_s".into());
        }
        Ok(ApprovalPolicy {
            required_approver,
            require_different_approver,
            initiated_by,
            approver_fingerprint,
            approver_key,
            expires_after_s,
        })
    }

    /// The canonical JSON object (all five keys, `null` for absent values).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a policy is JSON")
    }

    /// The policy file's bytes: canonical JSON and LF.
    pub fn file_bytes(&self) -> Vec<u8> {
        let mut bytes = canonical::to_vec(&self.to_value());
        bytes.push(b'\n');
        bytes
    }

    /// SHA-256 of the canonical policy (the checksum chained in
    /// `run_created`).
    pub fn checksum(&self) -> String {
        canonical::digest(&self.to_value())
    }

    /// One line for people, at most 256 characters.
    pub fn summary(&self) -> String {
        let text = format!(
            "approver={} four_eyes={} initiator={} credential={} expires_after_s={}",
            self.required_approver.as_deref().unwrap_or("any"),
            if self.require_different_approver {
                "on"
            } else {
                "off"
            },
            self.initiated_by.as_deref().unwrap_or("none"),
            if self.approver_fingerprint.is_some() {
                "pinned"
            } else {
                "none"
            },
            self.expires_after_s
                .map_or_else(|| "none".to_string(), |s| s.to_string()),
        );
        let text = match &self.approver_key {
            Some(_) => format!("{text} key=ssh-ed25519"),
            None => text,
        };
        text.chars().take(256).collect()
    }

    /// The evidence item that binds the policy into `run_created`.
    pub fn evidence_item(&self) -> Value {
        json!({
            "checksum": self.checksum(),
            "kind": POLICY_KIND,
            "path": POLICY_FILE,
            "summary": self.summary(),
        })
    }

    /// Read back a frozen policy file: its bytes must be the canonical
    /// policy whose hash is the chained `checksum`, followed by LF.
    pub fn from_frozen(bytes: &[u8], checksum: &str) -> Result<ApprovalPolicy, String> {
        const MISMATCH: &str = "approval policy file does not match its chained checksum";
        let content = bytes.strip_suffix(b"\n").ok_or(MISMATCH)?;
        if canonical::sha256_hex(content) != checksum {
            return Err(MISMATCH.into());
        }
        let value: Value = serde_json::from_slice(content).map_err(|_| MISMATCH.to_string())?;
        let policy =
            ApprovalPolicy::from_input(&value, None).map_err(|e| format!("{MISMATCH}: {e}"))?;
        if canonical::to_vec(&policy.to_value()) != content {
            return Err(MISMATCH.into());
        }
        Ok(policy)
    }
}

/// A recorded approval decision.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Decision {
    /// `approved` or `denied`.
    pub decision: &'static str,
    pub by: Option<String>,
    /// `env` or `credential` (None when no identity was recorded).
    pub source: Option<String>,
    pub at: String,
    pub sequence: u64,
}

impl Decision {
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a decision is JSON")
    }

    /// How this decision proves who made it (trust model §2 promise 4):
    /// `("signed", Some(fingerprint))` when the frozen policy pins
    /// `approver_key`, the decision is an approval the gate recorded as
    /// signed and replay found no `approval_gate` breach at it (replay
    /// verified the signature); otherwise `("asserted", None)`: its writer
    /// says who decided, and anyone who can append could say the same.
    pub fn proof(
        &self,
        status: &PolicyStatus,
        breaches: &[Breach],
    ) -> (&'static str, Option<String>) {
        let breached = breaches
            .iter()
            .any(|b| b.sequence == self.sequence && b.rule == super::breach::APPROVAL_GATE);
        let key = match status {
            PolicyStatus::Frozen { policy, .. } => policy.approver_key.as_deref(),
            _ => None,
        };
        match key {
            Some(key)
                if !breached
                    && self.decision == "approved"
                    && self.source.as_deref() == Some(ApprovalSource::Signature.as_str()) =>
            {
                ("signed", super::signed::key_fingerprint(key))
            }
            _ => ("asserted", None),
        }
    }

    /// [`Self::to_value`] with the proof: `proof` (`signed`/`asserted`)
    /// and `key` (the signing key's fingerprint, or null).
    pub fn to_value_with_proof(&self, status: &PolicyStatus, breaches: &[Breach]) -> Value {
        let mut value = self.to_value();
        let (proof, key) = self.proof(status, breaches);
        if let Some(object) = value.as_object_mut() {
            object.insert("proof".into(), json!(proof));
            object.insert("key".into(), json!(key));
        }
        value
    }
}

/// What a receipt says about approvals, folded from its verified events:
/// the policy binding of `run_created`, its timestamp and every decision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalLedger {
    /// The chained policy checksum, if `run_created` binds a policy.
    pub binding: Option<String>,
    /// Set when `run_created` carries a policy item that cannot be read as
    /// a binding (fail closed: the run refuses approvals).
    pub malformed_binding: Option<String>,
    pub created_at: Option<String>,
    pub decisions: Vec<Decision>,
}

fn evidence_items<'a>(event: &'a ObjectRef<'a>) -> impl Iterator<Item = &'a ObjectRef<'a>> {
    event
        .get("evidence_refs")
        .and_then(JsonRef::as_array)
        .into_iter()
        .flatten()
        .filter_map(JsonRef::as_object)
}

fn item_text<'a>(item: &'a ObjectRef<'a>, key: &str) -> Option<&'a str> {
    item.get(key).and_then(JsonRef::as_str)
}

/// What a decision record says: approved or denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Approved,
    Denied,
}

impl Verdict {
    fn verb(self) -> &'static str {
        match self {
            Verdict::Approved => "approved_by",
            Verdict::Denied => "denied_by",
        }
    }
}

/// Where the gate took an approver's identity from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalSource {
    /// `BLUETAPE_APPROVED_BY` alone.
    Env,
    /// ... matched by the pinned credential file.
    Credential,
    /// ... proven by a signature with the pinned key.
    Signature,
}

impl ApprovalSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalSource::Env => "env",
            ApprovalSource::Credential => "credential",
            ApprovalSource::Signature => "signature",
        }
    }

    /// The only source a frozen policy admits.
    fn admitted_by(policy: &ApprovalPolicy) -> ApprovalSource {
        if policy.approver_key.is_some() {
            ApprovalSource::Signature
        } else if policy.approver_fingerprint.is_some() {
            ApprovalSource::Credential
        } else {
            ApprovalSource::Env
        }
    }
}

/// The gate's decision record, the summary of its `approver_identity`
/// item: `<verb>=<id> source=<source>`. Written by [`Self::summary`] and
/// read (from a receipt, whoever wrote it) by [`Self::parse`] only; the
/// source is kept as written, since a record by hand may name any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionRecord {
    pub identity: String,
    pub source: String,
}

impl DecisionRecord {
    fn new(identity: &str, source: ApprovalSource) -> DecisionRecord {
        DecisionRecord {
            identity: identity.to_string(),
            source: source.as_str().to_string(),
        }
    }

    fn summary(&self, verdict: Verdict) -> String {
        format!(
            "{}={} source={}",
            verdict.verb(),
            self.identity,
            self.source
        )
    }

    fn parse(summary: &str, verdict: Verdict) -> Option<DecisionRecord> {
        let mut parts = summary.split(' ');
        let id = parts
            .next()?
            .strip_prefix(verdict.verb())?
            .strip_prefix('=')?;
        let source = parts.next()?.strip_prefix("source=")?;
        if parts.next().is_some() || !is_approver_identity(id) {
            return None;
        }
        Some(DecisionRecord {
            identity: id.to_string(),
            source: source.to_string(),
        })
    }
}

impl ApprovalLedger {
    /// Observe one verified event (in receipt order).
    pub fn observe(&mut self, event: &Map<String, Value>) {
        self.observe_ref(&ObjectRef::from_map(event, &bumpalo::Bump::new()));
    }

    /// [`Self::observe`] of an event as the verifier read it.
    pub fn observe_ref(&mut self, event: &ObjectRef<'_>) {
        let text = |key: &str| event.get(key).and_then(JsonRef::as_str);
        let sequence = event.get("sequence").and_then(JsonRef::as_u64).unwrap_or(0);
        match text("event_type").and_then(EventType::parse) {
            Some(EventType::RunCreated) if sequence == 1 => {
                self.created_at = text("timestamp").map(str::to_string);
                let items: Vec<_> = evidence_items(event)
                    .filter(|item| item_text(item, "kind") == Some(POLICY_KIND))
                    .collect();
                match items.as_slice() {
                    [] => {}
                    [item]
                        if item_text(item, "path") == Some(POLICY_FILE)
                            && item_text(item, "checksum").is_some() =>
                    {
                        self.binding = item_text(item, "checksum").map(str::to_string);
                    }
                    _ => {
                        self.malformed_binding =
                            Some("run_created carries a malformed approval policy binding".into());
                    }
                }
            }
            Some(EventType::PlanApproved) => {
                self.decide(event, Verdict::Approved, sequence);
            }
            Some(EventType::RunCancelled)
                if matches!(text("from_state"), Some("planned" | "approved")) =>
            {
                self.decide(event, Verdict::Denied, sequence);
            }
            _ => {}
        }
    }

    /// The gate's own decision record: the last `approver_identity` item
    /// bound to this run's policy checksum.
    /// Add the decision `event` records, with the identity that made it.
    fn decide(&mut self, event: &ObjectRef<'_>, verdict: Verdict, sequence: u64) {
        let record = self.record(event, verdict);
        let at = event.get("timestamp").and_then(JsonRef::as_str);
        self.decisions.push(Decision {
            decision: match verdict {
                Verdict::Approved => "approved",
                Verdict::Denied => "denied",
            },
            by: record.as_ref().map(|r| r.0.clone()),
            source: record.map(|r| r.1),
            at: at.unwrap_or_default().to_string(),
            sequence,
        });
    }

    fn record(&self, event: &ObjectRef<'_>, verdict: Verdict) -> Option<(String, String)> {
        let checksum = self.binding.as_deref()?;
        evidence_items(event)
            .filter(|item| {
                item_text(item, "kind") == Some(IDENTITY_KIND)
                    && item_text(item, "checksum") == Some(checksum)
            })
            .filter_map(|item| item_text(item, "summary"))
            .filter_map(|summary| DecisionRecord::parse(summary, verdict))
            .map(|record| (record.identity, record.source))
            .last()
    }

    /// Whether the run was created with an approval policy (well-formed or
    /// not).
    pub fn has_policy(&self) -> bool {
        self.binding.is_some() || self.malformed_binding.is_some()
    }
}

/// The frozen policy as the gate sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyStatus {
    /// The run has no policy: the reference's rules apply unchanged.
    Absent,
    /// The policy file matches its chained checksum.
    Frozen {
        policy: ApprovalPolicy,
        checksum: String,
    },
    /// The run has a policy, but its file does not match (or is gone, or
    /// the binding itself is malformed).
    Tampered {
        checksum: Option<String>,
        problem: String,
    },
}

impl PolicyStatus {
    /// Combine the chain's binding with the policy file's bytes (`Err`
    /// describes why the file could not be read).
    pub fn resolve(ledger: &ApprovalLedger, file: Option<Result<Vec<u8>, String>>) -> PolicyStatus {
        if let Some(problem) = &ledger.malformed_binding {
            return PolicyStatus::Tampered {
                checksum: None,
                problem: problem.clone(),
            };
        }
        let Some(checksum) = &ledger.binding else {
            return PolicyStatus::Absent;
        };
        let tampered = |problem: String| PolicyStatus::Tampered {
            checksum: Some(checksum.clone()),
            problem,
        };
        match file {
            None => tampered("approval policy file was not read".into()),
            Some(Err(problem)) => tampered(problem),
            Some(Ok(bytes)) => match ApprovalPolicy::from_frozen(&bytes, checksum) {
                Ok(policy) => PolicyStatus::Frozen {
                    policy,
                    checksum: checksum.clone(),
                },
                Err(problem) => tampered(problem),
            },
        }
    }

    /// The checkpoint's form of the status.
    pub fn to_value(&self) -> Value {
        match self {
            PolicyStatus::Absent => json!({"status": "absent"}),
            PolicyStatus::Frozen { policy, checksum } => {
                json!({"checksum": checksum, "policy": policy.to_value(), "status": "frozen"})
            }
            PolicyStatus::Tampered { checksum, problem } => {
                json!({"checksum": checksum, "problem": problem, "status": "tampered"})
            }
        }
    }

    /// Read back [`Self::to_value`]; a frozen policy must still be valid
    /// and match its checksum.
    pub fn from_value(value: &Value) -> Option<PolicyStatus> {
        let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
        match value.get("status")?.as_str()? {
            "absent" => Some(PolicyStatus::Absent),
            "frozen" => {
                let policy = ApprovalPolicy::from_input(value.get("policy")?, None).ok()?;
                let checksum = text("checksum")?;
                (policy.checksum() == checksum).then_some(PolicyStatus::Frozen { policy, checksum })
            }
            "tampered" => Some(PolicyStatus::Tampered {
                checksum: text("checksum"),
                problem: text("problem")?,
            }),
            _ => None,
        }
    }

    pub fn checksum(&self) -> Option<&str> {
        match self {
            PolicyStatus::Absent => None,
            PolicyStatus::Frozen { checksum, .. } => Some(checksum),
            PolicyStatus::Tampered { checksum, .. } => checksum.as_deref(),
        }
    }

    /// Whether the policy pins an approver credential.
    pub fn pins_credential(&self) -> bool {
        matches!(self, PolicyStatus::Frozen { policy, .. } if policy.approver_fingerprint.is_some())
    }
}

/// The two recorded times replay checks an approval's window with: the
/// first event's timestamp and the approving event's.
#[derive(Debug, Clone, Copy)]
pub struct ApprovalWindow<'a> {
    pub created_at: Option<&'a str>,
    pub approved_at: Option<&'a str>,
}

impl ApprovalWindow<'_> {
    /// What is wrong when a policy's `expires_after_s` is not kept by the
    /// recorded times (the gate compares wall-clock time when it writes;
    /// replay has only the record).
    fn breach(&self, expires_after_s: Option<u64>) -> Option<String> {
        let window = expires_after_s?;
        let read = |t: Option<&str>| t.and_then(parse_timestamp);
        let (Some(created), Some(approved)) = (read(self.created_at), read(self.approved_at))
        else {
            return Some(format!(
                "plan_approved under expires_after_s {window} without readable run_created and approval timestamps"
            ));
        };
        let elapsed = (approved - created).num_seconds();
        (elapsed > window as i64).then(|| {
            format!(
                "plan_approved {elapsed} s after run_created, beyond the policy's expires_after_s {window}"
            )
        })
    }
}

/// Replay's approval gate (contracts/approvals.md): whether a `plan_approved` —
/// written by us, by the reference or by hand — satisfies the run's frozen
/// policy.
/// `None` when it does; otherwise what was found. Without a policy there is
/// no gate (the reference's rule). A record is the gate's own
/// `approver_identity` item: exactly one, bound to the policy checksum,
/// `approved_by=<id> source=<source>` with the only source the policy
/// admits, naming an identity the policy admits. When the policy file
/// cannot be read only the record's shape and binding can be checked.
/// Without a signature the identity is asserted, not proven: anyone who
/// can write the record can claim it (see `contracts/approvals.md`).
pub fn gate_breach(
    status: &PolicyStatus,
    window: ApprovalWindow<'_>,
    event: &ObjectRef<'_>,
) -> Option<String> {
    let checksum = match status {
        PolicyStatus::Absent => return None,
        PolicyStatus::Tampered {
            checksum: None,
            problem,
        } => {
            return Some(format!(
                "plan_approved under an approval policy that cannot be read: {problem}"
            ));
        }
        PolicyStatus::Tampered {
            checksum: Some(checksum),
            ..
        }
        | PolicyStatus::Frozen { checksum, .. } => checksum,
    };
    let items: Vec<&ObjectRef<'_>> = evidence_items(event).collect();
    if items
        .iter()
        .any(|item| item_text(item, "kind") == Some(POLICY_KIND))
    {
        return Some("plan_approved carries an approval_policy item".into());
    }
    let records: Vec<&&ObjectRef<'_>> = items
        .iter()
        .filter(|item| item_text(item, "kind") == Some(IDENTITY_KIND))
        .collect();
    let record = match records.as_slice() {
        [] => {
            return Some(
                "plan_approved without the gate's approver record: nobody the policy admits approved"
                    .into(),
            );
        }
        [record] => record,
        _ => {
            return Some(format!(
                "plan_approved carries {} approver records",
                records.len()
            ));
        }
    };
    if item_text(record, "checksum") != Some(checksum.as_str()) {
        return Some("the approver record is not bound to the run's policy checksum".into());
    }
    let Some(DecisionRecord { identity, source }) =
        item_text(record, "summary").and_then(|s| DecisionRecord::parse(s, Verdict::Approved))
    else {
        return Some("the approver record is malformed".into());
    };
    let PolicyStatus::Frozen { policy, .. } = status else {
        return None;
    };
    let admitted = ApprovalSource::admitted_by(policy).as_str();
    if source != admitted {
        return Some(format!(
            "approval by '{identity}' claims source={} but the policy admits only source={admitted}",
            shown(&source)
        ));
    }
    if policy.require_different_approver && policy.initiated_by.as_deref() == Some(&identity) {
        return Some(format!(
            "approval by the initiator '{identity}' under four eyes"
        ));
    }
    if let Some(required) = &policy.required_approver
        && *required != identity
    {
        return Some(format!(
            "approval by '{identity}', but the policy requires approver '{required}'"
        ));
    }
    if let Some(found) = window.breach(policy.expires_after_s) {
        return Some(found);
    }
    let signatures: Vec<&&ObjectRef<'_>> = items
        .iter()
        .filter(|item| item_text(item, "kind") == Some(super::signed::SIGNATURE_KIND))
        .collect();
    let Some(key) = &policy.approver_key else {
        return (!signatures.is_empty())
            .then(|| "plan_approved carries a signature the policy cannot check".into());
    };
    let [signature] = signatures.as_slice() else {
        return Some(format!(
            "plan_approved carries {} approver signatures where the policy requires exactly one",
            signatures.len()
        ));
    };
    if item_text(signature, "checksum") != Some(checksum.as_str()) {
        return Some("the approver signature is not bound to the run's policy checksum".into());
    }
    let Some(stored) =
        item_text(signature, "summary").and_then(super::signed::StoredSignature::from_summary)
    else {
        return Some("the approver signature is malformed".into());
    };
    let (Some(run_id), Some(head)) = (
        event.get("run_id").and_then(JsonRef::as_str),
        event.get("previous_checksum").and_then(JsonRef::as_str),
    ) else {
        return Some("plan_approved names no run or head for its signature".into());
    };
    let statement = super::signed::statement(run_id, head, checksum);
    super::signed::verify_stored(key, &stored, &statement)
        .err()
        .map(|problem| format!("approval by '{identity}': {problem}"))
}

/// What the approver's credential file (`BLUETAPE_APPROVER_FILE`) showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// The variable is unset (or blank).
    NotGiven,
    /// The file is missing, loose, foreign or malformed.
    Unusable(String),
    /// A well-formed credential: its approver and its token's fingerprint.
    Read {
        approver: String,
        fingerprint: String,
    },
}

/// The caller's claim: `BLUETAPE_APPROVED_BY` (trimmed; `None` when unset
/// or blank) and, when the policy pins one, the credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub identity: Option<String>,
    pub credential: Credential,
    /// `run-approve --signature FILE`: the file's bytes (or why they could
    /// not be read) and the run they must approve.
    pub signature: Option<SignatureClaim>,
}

/// A signature file given to `run-approve`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureClaim {
    pub run_id: String,
    pub file: Result<Vec<u8>, String>,
}

/// Caller evidence may not forge the gate's own records.
fn reject_reserved_kinds(evidence: &Value) -> Result<(), FlowError> {
    let reserved = evidence.as_array().into_iter().flatten().any(|item| {
        matches!(
            item.get("kind").and_then(Value::as_str),
            Some(POLICY_KIND | IDENTITY_KIND | super::signed::SIGNATURE_KIND)
        )
    });
    if reserved {
        return invalid(InputRule::ReservedEvidenceKinds);
    }
    Ok(())
}

/// Room for the gate's record in the evidence list.
fn require_room(evidence: &Value, limits: &Limits) -> Result<(), FlowError> {
    let len = evidence.as_array().map_or(0, Vec::len) as u64;
    if len >= limits.max_evidence_refs {
        return invalid(InputRefusal::EvidenceRoom {
            max: limits.max_evidence_refs.saturating_sub(1),
            signed: false,
        });
    }
    Ok(())
}

fn with_record(evidence: &Value, summary: String, checksum: Option<&str>) -> Value {
    let mut items = evidence.as_array().cloned().unwrap_or_default();
    let mut record = Map::new();
    record.insert("kind".into(), json!(IDENTITY_KIND));
    record.insert("summary".into(), json!(summary));
    if let Some(checksum) = checksum {
        record.insert("checksum".into(), json!(checksum));
    }
    items.push(Value::Object(record));
    Value::Array(items)
}

/// Why an approval cannot happen from a state other than `planned`.
fn closed(state: RunState, ledger: &ApprovalLedger, identity: Option<&str>) -> FlowError {
    let tried = who(identity);
    let approved = ledger.decisions.iter().find(|d| d.decision == "approved");
    let message = match (approved, ledger.decisions.last()) {
        (Some(d), _) => format!(
            "approval was already consumed: the plan was approved at sequence {} by {}; run-approve by {tried} refused",
            d.sequence,
            d.by.as_deref()
                .map_or_else(|| "the owner".to_string(), |b| format!("'{b}'"))
        ),
        (None, Some(d)) => format!(
            "approval was already consumed: the plan was denied at sequence {}; run-approve by {tried} refused",
            d.sequence
        ),
        // Nothing decided, and not planned (cancelled first): the
        // transition refusal the run would give without a policy.
        (None, None) => {
            return ErrorKind::RunTransitionRefused {
                state,
                allowed: vec![RunState::Planned],
            }
            .into();
        }
    };
    ErrorKind::Approval(ApprovalRefusal::Consumed(message)).into()
}

/// The approval gate as the pipeline read it under the lock, against the
/// head the decision extends: the verified receipt's ledger and the
/// frozen policy's status.
#[derive(Debug, Clone, Copy)]
pub struct Gate<'a> {
    pub status: &'a PolicyStatus,
    pub ledger: &'a ApprovalLedger,
}

/// In-lock decision of `run-approve`. Without a policy this is exactly the
/// reference's rule. Under a policy, in order: the run is still `planned`
/// (else the approval was consumed), the policy file matches its chained
/// checksum, the evidence leaves room for the record and forges none,
/// identity present, not the initiator under four eyes, the designated
/// approver, the pinned credential, the approval window (wall clock, never
/// `at`).
pub fn decide_approve(
    state: &CoordinatorState,
    gate: Gate<'_>,
    claim: &Claim,
    now: Instant,
    at: &str,
    evidence: &Value,
    limits: &Limits,
) -> Result<Vec<Intent>, FlowError> {
    let Gate { status, ledger } = gate;
    if *status == PolicyStatus::Absent {
        return decide_run_transition(state, RunCommand::Approve, at, evidence, None);
    }
    require_evidence(evidence)?;
    let identity = claim.identity.as_deref();
    if state.run_state_enum() != RunState::Planned {
        return Err(closed(state.run_state_enum(), ledger, identity));
    }
    let PolicyStatus::Frozen { policy, checksum } = status else {
        let problem = match status {
            PolicyStatus::Tampered { problem, .. } => problem.as_str(),
            _ => "approval policy cannot be read",
        };
        return Err(ErrorKind::ReceiptCorrupt(format!(
            "{problem}; run-approve by {} refused",
            who(identity)
        ))
        .into());
    };
    reject_reserved_kinds(evidence)?;
    require_room(evidence, limits)?;
    if policy.approver_key.is_some() {
        // The signature is one more item.
        let len = evidence.as_array().map_or(0, Vec::len) as u64;
        if len + 2 > limits.max_evidence_refs {
            return invalid(InputRefusal::EvidenceRoom {
                max: limits.max_evidence_refs.saturating_sub(2),
                signed: true,
            });
        }
    }
    let Some(identity) = identity else {
        return refused("run-approve requires approver identity; set BLUETAPE_APPROVED_BY".into());
    };
    if !is_approver_identity(identity) {
        return refused(format!(
            "approver identity '{}' is not valid: BLUETAPE_APPROVED_BY must be {IDENTITY_RULE}",
            shown(identity)
        ));
    }
    if policy.require_different_approver && policy.initiated_by.as_deref() == Some(identity) {
        return refused(format!(
            "approval must be granted by someone other than '{identity}'"
        ));
    }
    if let Some(required) = &policy.required_approver
        && required != identity
    {
        return refused(format!(
            "approval requires approver '{required}', got '{identity}'"
        ));
    }
    let mut signed = None;
    let source = match (&policy.approver_fingerprint, &policy.approver_key) {
        (_, Some(key)) => {
            let Some(claim) = &claim.signature else {
                return refused(format!(
                    "approval by '{identity}' requires a signature by the pinned approver key: sign the output of approval-statement and pass --signature FILE"
                ));
            };
            let pem = match &claim.file {
                Ok(pem) => pem,
                Err(problem) => {
                    return refused(format!(
                        "approval signature of '{identity}' is unusable: {problem}"
                    ));
                }
            };
            let statement =
                super::signed::statement(&claim.run_id, state.last_checksum(), checksum);
            match super::signed::verify_pem(key, pem, &statement) {
                Ok(stored) => signed = Some(stored),
                Err(problem) => {
                    return refused(format!(
                        "approval signature of '{identity}' is refused: {problem}"
                    ));
                }
            }
            ApprovalSource::Signature
        }
        (_, None) if claim.signature.is_some() => {
            return refused(format!(
                "the run's approval policy pins no approver_key, so the signature of '{identity}' cannot be checked; approve without --signature"
            ));
        }
        (None, None) => ApprovalSource::Env,
        (Some(pinned), None) => {
            match &claim.credential {
                Credential::NotGiven => {
                    return refused(format!(
                        "approval by '{identity}' requires the pinned approver credential; set BLUETAPE_APPROVER_FILE"
                    ));
                }
                Credential::Unusable(problem) => {
                    return refused(format!(
                        "approver credential of '{identity}' is unusable: {problem}"
                    ));
                }
                Credential::Read { approver, .. } if approver != identity => {
                    return refused(format!(
                        "approver credential names '{}', not '{identity}'",
                        shown(approver)
                    ));
                }
                Credential::Read { fingerprint, .. } if fingerprint != pinned => {
                    return refused(format!(
                        "approver credential of '{identity}' does not match the pinned fingerprint"
                    ));
                }
                Credential::Read { .. } => {}
            }
            ApprovalSource::Credential
        }
    };
    if let Some(window) = policy.expires_after_s {
        let created = ledger
            .created_at
            .as_deref()
            .and_then(parse_timestamp)
            .ok_or_else(|| {
                ErrorKind::ReceiptCorrupt(
                    "run_created has no readable timestamp for the approval window".into(),
                )
            })?;
        // The recorded time counts too: replay re-checks the window from
        // the event's own timestamp, so a later `--at` must not pass here.
        let latest = parse_timestamp(at).map_or(now, |at| at.max(now));
        let elapsed = (latest - created).num_seconds();
        if elapsed > window as i64 {
            return Err(ErrorKind::Approval(ApprovalRefusal::Expired(format!(
                "approval request expired: {elapsed} s since run_created exceed expires_after_s {window}; approval by '{identity}' refused"
            ))).into());
        }
    }
    let mut evidence = with_record(
        evidence,
        DecisionRecord::new(identity, source).summary(Verdict::Approved),
        Some(checksum),
    );
    if let (Some(stored), Some(items)) = (signed, evidence.as_array_mut()) {
        items.push(stored.evidence_item(checksum));
    }
    decide_run_transition(state, RunCommand::Approve, at, &evidence, None)
}

/// In-lock decision of `run-cancel`. Stopping is always allowed: no
/// identity is needed and a tampered policy does not block it. Under a
/// policy, a cancel from `planned` or `approved` is a denial; when
/// `BLUETAPE_APPROVED_BY` is set it is recorded as who decided.
pub fn decide_deny(
    state: &CoordinatorState,
    ledger: &ApprovalLedger,
    identity: Option<&str>,
    at: &str,
    evidence: &Value,
    reason: Option<&str>,
    limits: &Limits,
) -> Result<Vec<Intent>, FlowError> {
    let denial = ledger.has_policy()
        && matches!(
            state.run_state_enum(),
            RunState::Planned | RunState::Approved
        );
    if !denial {
        return decide_run_transition(state, RunCommand::Cancel, at, evidence, reason);
    }
    require_evidence(evidence)?;
    reject_reserved_kinds(evidence)?;
    let Some(identity) = identity else {
        return decide_run_transition(state, RunCommand::Cancel, at, evidence, reason);
    };
    if !is_approver_identity(identity) {
        return invalid(InputRefusal::ApproverIdentity {
            rule: IDENTITY_RULE,
        });
    }
    require_room(evidence, limits)?;
    let evidence = with_record(
        evidence,
        DecisionRecord::new(identity, ApprovalSource::Env).summary(Verdict::Denied),
        ledger.binding.as_deref(),
    );
    decide_run_transition(state, RunCommand::Cancel, at, &evidence, reason)
}

#[cfg(test)]
#[path = "approval_tests.rs"]
mod tests;
