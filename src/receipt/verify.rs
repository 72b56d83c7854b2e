//! Streaming receipt verification (reference-runtime §3.1, §4.3.1). Memory is
//! bounded by one line: each line is framed, parsed, contract-checked and
//! chained, then handed to the caller and dropped.

use serde_json::{Map, Value};
use std::io::{BufRead, ErrorKind};

use super::canonical;
use super::manifest::RunManifest;
use super::rules::{EventContract, Family, check_event};

/// Where a receipt stops being trustworthy. `first_bad` is the 1-based line
/// index (not the sequence the line claims).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptDamage {
    pub first_bad_sequence: u64,
    pub last_trusted_sequence: u64,
    pub last_trusted_checksum: String,
    pub reason: String,
    message: String,
}

impl ReceiptDamage {
    pub fn new(first_bad: u64, trusted: u64, trusted_checksum: &str, reason: &str) -> Self {
        let message = if reason == NO_EVENTS {
            NO_EVENTS.to_string()
        } else {
            format!("receipt corruption at sequence {first_bad}: {reason}")
        };
        ReceiptDamage {
            first_bad_sequence: first_bad,
            last_trusted_sequence: trusted,
            last_trusted_checksum: trusted_checksum.to_string(),
            reason: reason.to_string(),
            message,
        }
    }

    /// The reference's message for this damage.
    pub fn message(&self) -> &str {
        &self.message
    }
}

pub const NO_EVENTS: &str = "receipt contains no events";
pub const INCOMPLETE: &str = "incomplete final event";

/// The verified prefix of a receipt so far: enough to continue verifying
/// from a known byte offset (a checkpoint) without re-reading earlier lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainPosition {
    /// Number of verified events (= last sequence).
    pub sequence: u64,
    /// Checksum of the last verified event ("" before the first).
    pub checksum: String,
    /// Bytes of the receipt covered by the verified events.
    pub byte_length: u64,
    /// Owner fingerprint (Phase 2) expected on the next event.
    pub owner_fingerprint: Option<String>,
    /// Owner epoch expected on the next event.
    pub owner_epoch: u64,
    /// Length of the last verified line, LF included (0 before the first).
    pub last_line_length: u64,
}

impl ChainPosition {
    /// The position before the first line of a run's receipt.
    pub fn genesis(manifest: &RunManifest) -> ChainPosition {
        ChainPosition {
            sequence: 0,
            checksum: String::new(),
            byte_length: 0,
            owner_fingerprint: manifest.owner_fingerprint().map(str::to_string),
            owner_epoch: manifest.initial_owner_epoch(),
            last_line_length: 0,
        }
    }
}

/// A verifier for one run's receipt.
pub struct ChainVerifier<'a> {
    manifest: &'a RunManifest,
    run_id: &'a str,
    position: ChainPosition,
    /// Lines up to this sequence must be byte-for-byte canonical: this tool
    /// acknowledged them, so any other bytes are an edit made afterwards.
    canonical_until: u64,
}

impl<'a> ChainVerifier<'a> {
    pub fn new(manifest: &'a RunManifest, run_id: &'a str, position: ChainPosition) -> Self {
        ChainVerifier {
            manifest,
            run_id,
            position,
            canonical_until: 0,
        }
    }

    /// Require byte-canonical lines up to `sequence` (the acknowledged head).
    pub fn require_canonical_until(&mut self, sequence: u64) {
        self.canonical_until = sequence;
    }

    pub fn position(&self) -> &ChainPosition {
        &self.position
    }

    fn damage(&self, reason: &str) -> ReceiptDamage {
        ReceiptDamage::new(
            self.position.sequence + 1,
            self.position.sequence,
            &self.position.checksum,
            reason,
        )
    }

    /// Verify every remaining line of `reader`, calling `accept` with each
    /// verified event. I/O errors are reported separately from damage.
    pub fn verify_stream<R: BufRead>(
        &mut self,
        reader: &mut R,
        mut accept: impl FnMut(&Map<String, Value>, &ChainPosition) -> Result<(), String>,
    ) -> Result<Result<(), StreamStop>, std::io::Error> {
        let limit = self.manifest.contract.limits.max_receipt_line_bytes;
        let cap = limit.saturating_add(2);
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = match std::io::Read::take(&mut *reader, cap).read_until(b'\n', &mut line) {
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if read == 0 {
                return Ok(Ok(()));
            }
            let event = match self.check_line(&line, limit) {
                Ok(event) => event,
                Err(damage) => return Ok(Err(StreamStop::Damage(damage))),
            };
            if let Err(reason) = accept(&event, &self.position) {
                return Ok(Err(StreamStop::Rejected(reason)));
            }
        }
    }

    /// Check one framed line (with its LF) and advance the chain.
    pub fn check_line(
        &mut self,
        line: &[u8],
        limit: u64,
    ) -> Result<Map<String, Value>, ReceiptDamage> {
        let len = line.len() as u64;
        if len >= limit.saturating_add(2) {
            return Err(self.damage("event too large"));
        }
        let Some(content) = line.strip_suffix(b"\n") else {
            return Err(self.damage(INCOMPLETE));
        };
        if content.len() as u64 > limit {
            return Err(self.damage("event too large"));
        }
        // Python's bytes parser accepts one leading UTF-8 BOM.
        let json = content.strip_prefix(b"\xef\xbb\xbf").unwrap_or(content);
        let value: Value = match serde_json::from_slice(json) {
            Ok(v) => v,
            Err(_) => return Err(self.damage("invalid JSON")),
        };
        let Value::Object(event) = value else {
            return Err(self.damage("invalid event"));
        };
        let contract = EventContract {
            family: self.manifest.contract.family,
            event_types: &self.manifest.contract.event_types,
            limits: &self.manifest.contract.limits,
            epoch: self.position.owner_epoch,
        };
        // Floats are never valid in an event (a tightening, see DEVIATIONS.md).
        if event.values().any(canonical::contains_float) || check_event(&event, &contract).is_err()
        {
            return Err(self.damage("event contract mismatch"));
        }
        let expected_sequence = self.position.sequence + 1;
        if event["sequence"].as_u64() != Some(expected_sequence) {
            return Err(self.damage("sequence mismatch"));
        }
        if event["run_id"].as_str() != Some(self.run_id) {
            return Err(self.damage("run id mismatch"));
        }
        if event["manifest_hash"].as_str() != Some(self.manifest.contract.hash.as_str()) {
            return Err(self.damage("manifest hash mismatch"));
        }
        if self.manifest.contract.family == Family::V1_1
            && event["owner_token"].as_str() != self.position.owner_fingerprint.as_deref()
        {
            return Err(self.damage("owner mismatch"));
        }
        if event["previous_checksum"].as_str() != Some(self.position.checksum.as_str()) {
            return Err(self.damage("previous checksum mismatch"));
        }
        let claimed = event["checksum"].as_str().unwrap_or_default().to_string();
        if event_checksum(&event) != claimed {
            return Err(self.damage("checksum mismatch"));
        }
        if expected_sequence <= self.canonical_until
            && canonical::to_vec(&Value::Object(event.clone())).as_slice() != content
        {
            return Err(self.damage("event bytes differ from their acknowledged canonical form"));
        }
        self.position.sequence = expected_sequence;
        self.position.checksum = claimed;
        self.position.byte_length += len;
        self.position.last_line_length = len;
        if self.manifest.contract.family == Family::V1_1 && event["event_type"] == "run_resumed" {
            self.position.owner_fingerprint = event
                .get("metadata")
                .and_then(|m| m.get("new_owner_fingerprint"))
                .and_then(Value::as_str)
                .map(str::to_string);
            self.position.owner_epoch += 1;
        }
        Ok(event)
    }
}

/// Why a stream stopped before its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamStop {
    /// The receipt bytes are damaged at a line.
    Damage(ReceiptDamage),
    /// The caller refused a verified event (e.g. the coordinator reducer).
    Rejected(String),
}

/// SHA-256 of the canonical event without its `checksum` key.
pub fn event_checksum(event: &Map<String, Value>) -> String {
    canonical::sha256_hex(&canonical::to_vec_without(event, "checksum"))
}
