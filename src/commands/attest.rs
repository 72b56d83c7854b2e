//! `attest` (contracts/bundle.md §attest): a DSSE envelope
//! (payloadType `application/vnd.in-toto+json`) carrying an in-toto
//! Statement v1 that a run completed, signed over DSSE's PAE with the
//! Ed25519 key of the signed heads. Verifiers nobody here wrote
//! (securesystemslib, in-toto-attestation) check it in the tests.

use crate::store::root::StateRoot;
use std::path::Path;

use base64::Engine;
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::bundle::{Replayed, replay_full};
use super::error::{ErrorKind, FlowResult};
use crate::coordinator::breach::{Breach, breaches_value};
use crate::coordinator::completion::evaluate_completion;
use crate::receipt::canonical;
use crate::receipt::merkle::{hash_to_base64, tree_root};
use crate::receipt::signed_head::SignerKey;

pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// Our predicate type (contracts/bundle.md documents its fields).
pub const PREDICATE_TYPE: &str =
    "https://github.com/bluetape4k/bluetape-skills/bluetape-flow/run-completion/v1";
/// The predicate type of a completed run whose receipt records breaches of
/// our rules, signed only with `--allow-breaches`: a consumer that accepts
/// clean completions never accepts one of these by mistake.
pub const BREACHED_PREDICATE_TYPE: &str =
    "https://github.com/bluetape4k/bluetape-skills/bluetape-flow/run-completion-with-breaches/v1";

/// DSSE's pre-authentication encoding (DSSE v1 protocol):
/// `"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`.
pub fn pae(payload_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {} {} ",
        payload_type.len(),
        payload_type,
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// A DSSE envelope of `body`, signed by `key`.
pub fn envelope(key: &SignerKey, body: &[u8]) -> FlowResult<Value> {
    let signature = key
        .sign_message(&pae(PAYLOAD_TYPE, body))
        .map_err(|e| ErrorKind::Contract(e.message().to_string()))?;
    let b64 = base64::engine::general_purpose::STANDARD;
    Ok(json!({
        "payload": b64.encode(body),
        "payloadType": PAYLOAD_TYPE,
        "signatures": [{"keyid": key.key_hash(), "sig": b64.encode(signature)}],
    }))
}

fn digest(value: &Value) -> String {
    hex::encode(Sha256::digest(canonical::to_vec(value)))
}

fn digests(refs: &[Value]) -> Vec<String> {
    refs.iter().map(digest).collect()
}

/// The predicate: what a CI job needs to gate on a completed run.
fn predicate(replayed: &Replayed, tree_root_b64: &str) -> Value {
    let state = &replayed.state;
    let manifest = &replayed.run.manifest;
    let components: Vec<Value> = state
        .topology()
        .values()
        .map(|c| {
            let history = state.check_history().get(&c.id);
            let checks: Vec<Value> = c
                .required_checks
                .iter()
                .map(|check| {
                    let last = history.and_then(|h| h.get(check)).and_then(|h| h.last());
                    json!({
                        "name": check,
                        "passed": last.map(|r| r.passed),
                        "evidence_digests": last.map(|r| digests(&r.evidence_refs)).unwrap_or_default(),
                    })
                })
                .collect();
            json!({
                "id": c.id,
                "required": c.required,
                "owner_lane": c.owner_lane,
                "coverage_state": c.coverage_state.as_str(),
                "dependencies": c.dependencies,
                "checks": checks,
                "evidence_digests": digests(&c.evidence_refs),
            })
        })
        .collect();
    let lanes: Vec<Value> = state
        .lanes()
        .values()
        .map(|l| {
            json!({
                "lane_id": l.id,
                "agent_id": l.agent_id,
                "state": l.state.as_str(),
                "terminal_sequence": l.terminal_sequence,
                "parent_lane_id": l.parent_lane_id,
                "replacement_lane_id": l.replacement_lane_id,
                "evidence_digest": l.evidence_digest,
            })
        })
        .collect();
    let approvals: Vec<Value> = replayed
        .ledger
        .decisions
        .iter()
        .map(|d| d.to_value_with_proof(state.gate(), state.breaches()))
        .collect();
    json!({
        "run_id": replayed.run.dir.run_id,
        "workflow_type": manifest.run.as_ref().and_then(|r| r.get("workflow_type")).cloned(),
        "manifest_version": manifest.contract.version,
        "manifest_hash": manifest.contract.hash,
        "final_head": {
            "sequence": replayed.position.sequence,
            "checksum": replayed.position.checksum,
            "tree_root": tree_root_b64,
        },
        "run_state": state.run_state(),
        "completed_at": replayed.completed_at,
        "components": components,
        "lanes": lanes,
        "approval_policy_checksum": replayed.ledger.binding,
        "approvals": approvals,
        "recovery_of": replayed.recovery_of,
        "breaches": breaches_value(state.breaches()),
        "tool": super::bundle::tool(),
    })
}

/// `attest`: verify and replay the run in full; refuse a run that is not
/// completed (exit 6 with its gaps) and, unless `allow_breaches`, a run
/// whose receipt records breaches of our rules (exit 6 with them; with the
/// flag the breaches are signed into the predicate under
/// [`BREACHED_PREDICATE_TYPE`]); write the signed envelope outside the
/// state root.
/// What `attest` answers: the signed statement written and what it binds.
#[derive(Debug, Serialize)]
pub struct Attested {
    /// The envelope file written.
    pub path: String,
    pub predicate_type: &'static str,
    /// The breaches signed into the predicate (present only with some).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub breaches: Vec<Breach>,
    pub run_id: String,
    /// The SHA-256 of the envelope file.
    pub sha256: String,
    /// The SHA-256 of the receipt the statement names.
    pub subject_sha256: String,
}

pub fn attest(
    root: &StateRoot,
    run_id: &str,
    key: &SignerKey,
    out: &Path,
    cwd: &Path,
    force: bool,
    allow_breaches: bool,
) -> FlowResult<Attested> {
    let replayed = replay_full(root, run_id)?;
    if replayed.state.run_state() != "completed" {
        let report = evaluate_completion(&replayed.state);
        let gaps = report.missing_ids();
        return Err(ErrorKind::CompletionBlocked {
            message: format!(
                "run is {}, not completed: nothing to attest (completion gaps: {})",
                replayed.state.run_state(),
                if gaps.is_empty() {
                    "none; run complete".to_string()
                } else {
                    gaps.join(", ")
                }
            ),
            missing_ids: gaps,
            breaches: Vec::new(),
        }
        .into());
    }
    let breaches = replayed.state.breaches();
    if !breaches.is_empty() && !allow_breaches {
        return Err(ErrorKind::CompletionBlocked {
            message: format!(
                "run is completed, but its receipt breaks our rules: {}{}; a clean completion cannot be attested",
                breaches[0].describe(),
                match breaches.len() {
                    1 => String::new(),
                    n => format!(" (and {} more)", n - 1),
                }
            ),
            missing_ids: Vec::new(),
            breaches: breaches.to_vec(),
        }
        .hinted(format!(
            "a breach cannot be undone; to sign this run anyway, with its breaches inside the statement (predicate type {BREACHED_PREDICATE_TYPE}): bluetape-flow attest --run-id {{run_id}} --key FILE --out FILE --allow-breaches"
        )));
    }
    let predicate_type = if breaches.is_empty() {
        PREDICATE_TYPE
    } else {
        BREACHED_PREDICATE_TYPE
    };
    let tree = super::transparency::receipt_tree(&replayed.run, &replayed.position)?;
    let root_hash = tree_root(replayed.position.sequence, &tree)
        .map_err(|e| ErrorKind::ReceiptCorrupt(e.to_string()))?;
    let receipt_sha = replayed
        .run
        .dir
        .receipt_sha256(replayed.position.byte_length)?;
    let statement = json!({
        "_type": STATEMENT_TYPE,
        "subject": [{
            "name": format!("runs/{run_id}/receipt.jsonl"),
            "digest": {"sha256": receipt_sha},
        }],
        "predicateType": predicate_type,
        "predicate": predicate(&replayed, &hash_to_base64(&root_hash)),
    });
    let body = canonical::to_vec(&statement);
    let mut bytes = canonical::to_vec(&envelope(key, &body)?);
    bytes.push(b'\n');
    let path = crate::store::output::write_view_file(out, cwd, root, &bytes, force)?;
    Ok(Attested {
        path: path.to_string_lossy().into_owned(),
        predicate_type,
        breaches: breaches.to_vec(),
        run_id: run_id.to_string(),
        sha256: hex::encode(Sha256::digest(&bytes)),
        subject_sha256: receipt_sha,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pae_is_the_dsse_encoding() {
        // The example of the DSSE protocol document.
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
        );
    }
}
