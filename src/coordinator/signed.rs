//! Approvals that are signatures (contracts/approvals.md): a policy may pin
//! `approver_key`, an OpenSSH Ed25519 public key line. The approver signs
//! the canonical approval statement — the run id, the receipt head being
//! approved and the policy checksum — with `ssh-keygen -Y sign -n
//! bluetape-flow-approval`; `run-approve --signature FILE` verifies it and
//! stores the bare Ed25519 signature in the approval event, and replay
//! verifies it again against the statement it rebuilds from the event
//! itself (its run id and previous checksum), so a signature cannot move to
//! another run or another head.
//!
//! Pure: bytes in, verdicts out (RustCrypto `ssh-key`).

use serde_json::{Value, json};
use ssh_key::{Algorithm, HashAlg, PublicKey, Signature, SshSig};

use crate::receipt::canonical;

/// The SSH signature namespace of approval statements.
pub const NAMESPACE: &str = "bluetape-flow-approval";
/// Evidence kind of the stored signature on `plan_approved`.
pub const SIGNATURE_KIND: &str = "approver_signature";
/// Largest signature file `run-approve --signature` reads.
pub const MAX_SIGNATURE_BYTES: u64 = 8 * 1024;

/// Parse a policy's `approver_key`: one OpenSSH `ssh-ed25519` public key
/// line. Returns its canonical line (`ssh-ed25519 AAAA… comment`).
pub fn canonical_key(line: &str) -> Result<String, String> {
    let key = parse_key(line)?;
    key.to_openssh()
        .map_err(|_| "approver_key cannot be encoded".to_string())
}

/// The `SHA256:…` fingerprint of an `approver_key` line (as
/// `ssh-keygen -l` prints it), `None` when it is no ssh-ed25519 key.
pub fn key_fingerprint(line: &str) -> Option<String> {
    parse_key(line)
        .ok()
        .map(|key| key.fingerprint(HashAlg::Sha256).to_string())
}

fn parse_key(line: &str) -> Result<PublicKey, String> {
    let key = PublicKey::from_openssh(line.trim())
        .map_err(|_| "approver_key must be an OpenSSH public key line".to_string())?;
    if key.algorithm() != Algorithm::Ed25519 {
        return Err("approver_key must be an ssh-ed25519 key".into());
    }
    Ok(key)
}

/// The statement the approver signs: canonical JSON and LF.
pub fn statement(run_id: &str, head: &str, policy_checksum: &str) -> Vec<u8> {
    let mut bytes = canonical::to_vec(&json!({
        "head": head,
        "namespace": NAMESPACE,
        "policy_checksum": policy_checksum,
        "run_id": run_id,
        "statement": "bluetape-flow approval",
    }));
    bytes.push(b'\n');
    bytes
}

/// A verified signature as the approval event stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSignature {
    /// `sha256` or `sha512` (the SSHSIG message hash).
    pub hash: String,
    /// The 64-byte Ed25519 signature, hex.
    pub signature: String,
}

impl StoredSignature {
    /// The evidence item on `plan_approved`, bound to the policy checksum.
    pub fn evidence_item(&self, policy_checksum: &str) -> Value {
        json!({
            "checksum": policy_checksum,
            "kind": SIGNATURE_KIND,
            "summary": format!("sshsig {} {}", self.hash, self.signature),
        })
    }

    /// Read back [`Self::evidence_item`]'s summary.
    pub fn from_summary(summary: &str) -> Option<StoredSignature> {
        let mut parts = summary.split(' ');
        if parts.next()? != "sshsig" {
            return None;
        }
        let hash = parts.next()?;
        let signature = parts.next()?;
        let valid = matches!(hash, "sha256" | "sha512")
            && signature.len() == 128
            && signature
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            && parts.next().is_none();
        valid.then(|| StoredSignature {
            hash: hash.to_string(),
            signature: signature.to_string(),
        })
    }
}

fn hash_alg(name: &str) -> Option<HashAlg> {
    match name {
        "sha256" => Some(HashAlg::Sha256),
        "sha512" => Some(HashAlg::Sha512),
        _ => None,
    }
}

/// Verify an `ssh-keygen -Y sign` file (PEM `SSH SIGNATURE`) by the pinned
/// key over `statement`. `Err` says why, for people.
pub fn verify_pem(key_line: &str, pem: &[u8], statement: &[u8]) -> Result<StoredSignature, String> {
    let key = parse_key(key_line)?;
    let sig = SshSig::from_pem(pem).map_err(|_| {
        "the signature file is not an SSH signature (ssh-keygen -Y sign)".to_string()
    })?;
    if sig.public_key() != key.key_data() {
        return Err("the signature was not made with the policy's approver key".into());
    }
    if sig.namespace() != NAMESPACE {
        return Err(format!(
            "the signature's namespace is '{}', not '{NAMESPACE}'",
            sig.namespace().chars().take(64).collect::<String>()
        ));
    }
    let hash = match sig.hash_alg() {
        HashAlg::Sha256 => "sha256",
        HashAlg::Sha512 => "sha512",
        _ => return Err("the signature uses an unsupported hash".into()),
    };
    if sig.signature().algorithm() != Algorithm::Ed25519 || sig.signature().as_bytes().len() != 64 {
        return Err("the signature is not an Ed25519 signature".into());
    }
    key.verify(NAMESPACE, statement, &sig).map_err(|_| {
        "the signature does not verify over this run's approval statement (another run, another head, or damaged)".to_string()
    })?;
    Ok(StoredSignature {
        hash: hash.to_string(),
        signature: hex::encode(sig.signature().as_bytes()),
    })
}

/// Verify a stored signature again (replay).
pub fn verify_stored(
    key_line: &str,
    stored: &StoredSignature,
    statement: &[u8],
) -> Result<(), String> {
    let key = parse_key(key_line)?;
    let bytes = hex::decode(&stored.signature).map_err(|_| "signature is not hex".to_string())?;
    let hash = hash_alg(&stored.hash).ok_or("signature hash is unsupported")?;
    let signature =
        Signature::new(Algorithm::Ed25519, bytes).map_err(|_| "signature is malformed")?;
    let sig = SshSig::new(key.key_data().clone(), NAMESPACE, hash, signature)
        .map_err(|_| "signature is malformed")?;
    key.verify(NAMESPACE, statement, &sig)
        .map_err(|_| "the stored signature does not verify over the approval statement".into())
}
