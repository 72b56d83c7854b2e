//! Signed heads and proofs as text (contracts/transparency.md).
//! Pure: keys, notes and proofs are bytes in, values out.
//!
//! A signed head is a C2SP checkpoint (c2sp.org/tlog-checkpoint) in a
//! signed note (c2sp.org/signed-note), Ed25519, with Go `note` key texts:
//!
//! ```text
//! bluetape-flow/<run_id>
//! <N>
//! <base64 tree root over lines 1..N>
//! chain <N> <checksum of event N>
//! manifest <manifest_hash>
//!
//! — <key name> <base64(key hash ‖ signature)>
//! ```
//!
//! Notes and keys are parsed and signed by Cloudflare's `signed_note`, a
//! port of golang.org/x/mod/sumdb/note, so Go's `note.Open` accepts ours.

use signed_note::{Note, NoteError, Signer, StandardSigner, StandardVerifier, Verifier};

use super::merkle::{Hash, hash_from_base64, hash_to_base64};
use super::primitives::{is_identifier, is_sha256_hex};

/// The origin line's prefix; the run id follows.
pub const ORIGIN_PREFIX: &str = "bluetape-flow/";
/// The first line of an inclusion proof (c2sp.org/tlog-proof).
pub const PROOF_HEADER: &str = "c2sp.org/tlog-proof@v1";
/// No note, key file or proof of ours comes near this; larger input is
/// refused before it is parsed.
pub const MAX_TEXT_BYTES: usize = 64 * 1024;

/// Why a key, note or proof is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadError {
    /// A key text that is not a Go `note` key of ours (exit 2).
    Key(String),
    /// A note or proof that does not hold (exit 3).
    Invalid(String),
}

impl HeadError {
    pub fn message(&self) -> &str {
        match self {
            HeadError::Key(m) | HeadError::Invalid(m) => m,
        }
    }
}

fn invalid(m: impl Into<String>) -> HeadError {
    HeadError::Invalid(m.into())
}

/// The checkpoint body of a signed head.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadBody {
    pub run_id: String,
    pub size: u64,
    pub root: Hash,
    /// The checksum of event `size` (the hash chain's head).
    pub chain_checksum: String,
    pub manifest_hash: String,
}

fn parse_decimal(text: &str) -> Option<u64> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    let n: u64 = if canonical { text.parse().ok()? } else { None? };
    (n >> 63 == 0).then_some(n)
}

impl HeadBody {
    pub fn origin(&self) -> String {
        format!("{ORIGIN_PREFIX}{}", self.run_id)
    }

    /// The note text (every line ends in LF).
    pub fn text(&self) -> String {
        format!(
            "{}\n{}\n{}\nchain {} {}\nmanifest {}\n",
            self.origin(),
            self.size,
            hash_to_base64(&self.root),
            self.size,
            self.chain_checksum,
            self.manifest_hash
        )
    }

    /// Parse a note text strictly: exactly our five lines, canonical
    /// numbers and hashes.
    pub fn parse(text: &[u8]) -> Result<HeadBody, HeadError> {
        let text = std::str::from_utf8(text).map_err(|_| invalid("head text is not UTF-8"))?;
        let body = text
            .strip_suffix('\n')
            .ok_or_else(|| invalid("head text must end with a newline"))?;
        let lines: Vec<&str> = body.split('\n').collect();
        let [origin, size, root, chain, manifest] = lines.as_slice() else {
            return Err(invalid("head text must have exactly five lines"));
        };
        let run_id = origin
            .strip_prefix(ORIGIN_PREFIX)
            .filter(|id| is_identifier(id))
            .ok_or_else(|| invalid(format!("head origin is not {ORIGIN_PREFIX}<run_id>")))?;
        let size = parse_decimal(size).ok_or_else(|| invalid("head size is not a decimal"))?;
        if size == 0 {
            return Err(invalid("head size must be at least 1"));
        }
        let root =
            hash_from_base64(root).ok_or_else(|| invalid("head root is not a base64 SHA-256"))?;
        let chain_checksum = match chain.split(' ').collect::<Vec<_>>().as_slice() {
            ["chain", n, checksum] if parse_decimal(n) == Some(size) && is_sha256_hex(checksum) => {
                checksum.to_string()
            }
            _ => return Err(invalid("head chain line is not `chain <N> <checksum>`")),
        };
        let manifest_hash = match manifest.split(' ').collect::<Vec<_>>().as_slice() {
            ["manifest", hash] if is_sha256_hex(hash) => hash.to_string(),
            _ => return Err(invalid("head manifest line is not `manifest <sha256>`")),
        };
        Ok(HeadBody {
            run_id: run_id.to_string(),
            size,
            root,
            chain_checksum,
            manifest_hash,
        })
    }
}

/// A signer key (Go `note` text `PRIVATE+KEY+<name>+<hash>+<key>`).
pub struct SignerKey {
    signer: StandardSigner,
}

impl std::fmt::Debug for SignerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key itself.
        write!(f, "SignerKey({}+{:08x})", self.name(), self.key_id())
    }
}

/// The key hash field of a key text (`<name>+<hash>+…`, after `skip`
/// leading fields) must be 8 lowercase hex digits: one key, one text (Go
/// also reads upper case).
fn lowercase_hash(key: &str, skip: usize) -> Result<(), HeadError> {
    let hash = key.split('+').nth(skip + 1).unwrap_or_default();
    if hash.len() == 8
        && hash
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        Ok(())
    } else {
        Err(HeadError::Key(
            "key hash must be 8 lowercase hex digits".into(),
        ))
    }
}

/// Key text from a file: one line, an optional final LF.
fn one_line(text: &[u8], what: &str) -> Result<String, HeadError> {
    let text =
        std::str::from_utf8(text).map_err(|_| HeadError::Key(format!("{what} is not UTF-8")))?;
    let line = text.strip_suffix('\n').unwrap_or(text);
    if line.is_empty() || line.contains(['\n', '\r', ' ', '\t']) {
        return Err(HeadError::Key(format!(
            "{what} must be one key on one line"
        )));
    }
    Ok(line.to_string())
}

impl SignerKey {
    pub fn parse(text: &[u8]) -> Result<SignerKey, HeadError> {
        let line = one_line(text, "signer key file")?;
        lowercase_hash(&line, 2)?;
        let signer = StandardSigner::new(&line)
            .map_err(|e| HeadError::Key(format!("signer key file is malformed: {e}")))?;
        Ok(SignerKey { signer })
    }

    pub fn name(&self) -> &str {
        self.signer.name()
    }

    pub fn key_id(&self) -> u32 {
        self.signer.key_id()
    }

    /// The key hash as in file names and key texts (8 lowercase hex).
    pub fn key_hash(&self) -> String {
        format!("{:08x}", self.key_id())
    }

    /// Sign a head: the whole signed note.
    pub fn sign(&self, body: &HeadBody) -> Result<Vec<u8>, HeadError> {
        let mut note =
            Note::new(body.text().as_bytes(), &[]).map_err(|e| invalid(e.to_string()))?;
        note.add_sigs(&[&self.signer as &dyn Signer])
            .map_err(|e| invalid(e.to_string()))?;
        Ok(note.to_bytes())
    }

    /// An Ed25519 signature over `message` with this key (DSSE envelopes
    /// of `attest` are signed with the key of the heads).
    pub fn sign_message(&self, message: &[u8]) -> Result<Vec<u8>, HeadError> {
        self.signer
            .sign(message)
            .map_err(|e| invalid(e.to_string()))
    }

    /// Add this key's signature to an existing signed note (countersign).
    pub fn countersign(&self, note_bytes: &[u8]) -> Result<Vec<u8>, HeadError> {
        let mut note = Note::from_bytes(note_bytes).map_err(|e| invalid(e.to_string()))?;
        note.add_sigs(&[&self.signer as &dyn Signer])
            .map_err(|e| invalid(e.to_string()))?;
        Ok(note.to_bytes())
    }
}

/// A new key pair from a 32-byte seed: (signer key text, verifier key text).
pub fn generate_key(seed: [u8; 32], name: &str) -> Result<(String, String), HeadError> {
    if !signed_note::is_key_name_valid(name) {
        return Err(HeadError::Key(
            "key name must be non-empty, without spaces or '+'".into(),
        ));
    }
    use base64::Engine;
    let signing = ed25519_dalek::SigningKey::from_bytes(&seed);
    let vkey = signed_note::new_ed25519_verifier_key(name, &signing.verifying_key());
    let public = [&[1u8][..], signing.verifying_key().as_bytes()].concat();
    let skey = format!(
        "PRIVATE+KEY+{name}+{:08x}+{}",
        signed_note::key_id(name, &public),
        base64::engine::general_purpose::STANDARD.encode([&[1u8][..], &seed[..]].concat())
    );
    Ok((skey, vkey))
}

/// Verifier keys (Go `note` text `<name>+<hash>+<key>`), one per line.
#[derive(Debug, Clone, Default)]
pub struct VerifierKeys {
    keys: Vec<String>,
}

impl VerifierKeys {
    /// Parse a key file: one verifier key per line, blank lines ignored.
    pub fn parse(text: &[u8]) -> Result<VerifierKeys, HeadError> {
        let text = std::str::from_utf8(text)
            .map_err(|_| HeadError::Key("verifier key file is not UTF-8".into()))?;
        let mut keys = VerifierKeys::default();
        for line in text.split('\n').filter(|l| !l.is_empty()) {
            keys.add(line)?;
        }
        if keys.keys.is_empty() {
            return Err(HeadError::Key("verifier key file holds no key".into()));
        }
        Ok(keys)
    }

    pub fn add(&mut self, key: &str) -> Result<(), HeadError> {
        if key.starts_with("PRIVATE+") {
            return Err(HeadError::Key(
                "a verifier key file must not hold a signer key".into(),
            ));
        }
        lowercase_hash(key, 0)?;
        StandardVerifier::new(key)
            .map_err(|e| HeadError::Key(format!("verifier key is malformed: {e}")))?;
        self.keys.push(key.to_string());
        Ok(())
    }

    pub fn extend(&mut self, other: VerifierKeys) {
        self.keys.extend(other.keys);
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    fn list(&self) -> signed_note::VerifierList {
        let verifiers: Vec<Box<dyn Verifier>> = self
            .keys
            .iter()
            .filter_map(|k| StandardVerifier::new(k).ok())
            .map(|v| Box::new(v) as Box<dyn Verifier>)
            .collect();
        signed_note::VerifierList::new(verifiers)
    }
}

/// A parsed signed head: its body and who signed it.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenedHead {
    pub body: HeadBody,
    /// `name+hash` of every signature the given keys verified (empty when
    /// opened without keys).
    pub verified_by: Vec<String>,
    /// `name+hash` of every signature line.
    pub signatures: Vec<String>,
}

fn parse_note(bytes: &[u8]) -> Result<Note, HeadError> {
    if bytes.len() > MAX_TEXT_BYTES {
        return Err(invalid("signed head is larger than 65536 bytes"));
    }
    Note::from_bytes(bytes).map_err(|e| invalid(format!("signed head is not a signed note: {e}")))
}

fn signature_names(note_bytes: &[u8], text_len: usize) -> Vec<String> {
    // After the text and its blank line: one `— name base64` per line.
    let sigs = &note_bytes[(text_len + 1).min(note_bytes.len())..];
    String::from_utf8_lossy(sigs)
        .lines()
        .filter_map(|line| {
            let mut parts = line.split(' ');
            let (_, name, b64) = (parts.next()?, parts.next()?, parts.next()?);
            use base64::Engine;
            let raw = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
            let id = u32::from_be_bytes(raw.get(..4)?.try_into().ok()?);
            Some(format!("{name}+{id:08x}"))
        })
        .collect()
}

/// Parse a signed head without checking signatures (it must still be a
/// well-formed signed note with at least one signature line).
pub fn parse_head(bytes: &[u8]) -> Result<OpenedHead, HeadError> {
    let note = parse_note(bytes)?;
    let body = HeadBody::parse(note.text())?;
    Ok(OpenedHead {
        signatures: signature_names(bytes, note.text().len()),
        body,
        verified_by: Vec::new(),
    })
}

/// Open a signed head as Go's `note.Open` does: at least one signature by
/// a given key, every signature by a given key valid (others are ignored).
pub fn open_head(bytes: &[u8], keys: &VerifierKeys) -> Result<OpenedHead, HeadError> {
    let note = parse_note(bytes)?;
    let (verified, _) = note.verify(&keys.list()).map_err(|e| match e {
        NoteError::UnverifiedNote => invalid("signed head is not signed by any given key"),
        other => invalid(format!("signed head does not verify: {other}")),
    })?;
    let body = HeadBody::parse(note.text())?;
    Ok(OpenedHead {
        signatures: signature_names(bytes, note.text().len()),
        body,
        verified_by: verified
            .iter()
            .map(|s| format!("{}+{:08x}", s.name(), s.id()))
            .collect(),
    })
}

/// An inclusion proof in C2SP tlog-proof text.
#[derive(Debug, Clone, PartialEq)]
pub struct InclusionProof {
    pub index: u64,
    pub hashes: Vec<Hash>,
    /// The signed head (checkpoint note) it proves against.
    pub head: Vec<u8>,
}

impl InclusionProof {
    pub fn to_text(&self) -> Vec<u8> {
        let mut out = format!("{PROOF_HEADER}\nindex {}\n", self.index).into_bytes();
        for hash in &self.hashes {
            out.extend_from_slice(hash_to_base64(hash).as_bytes());
            out.push(b'\n');
        }
        out.push(b'\n');
        out.extend_from_slice(&self.head);
        out
    }

    /// Parse the text (an `extra` line is accepted and ignored).
    pub fn parse(bytes: &[u8]) -> Result<InclusionProof, HeadError> {
        if bytes.len() > MAX_TEXT_BYTES {
            return Err(invalid("proof is larger than 65536 bytes"));
        }
        let text = std::str::from_utf8(bytes).map_err(|_| invalid("proof is not UTF-8"))?;
        let (top, head) = text
            .split_once("\n\n")
            .ok_or_else(|| invalid("proof has no blank line before its signed head"))?;
        let mut lines = top.split('\n');
        if lines.next() != Some(PROOF_HEADER) {
            return Err(invalid(format!("proof does not start with {PROOF_HEADER}")));
        }
        let mut line = lines.next();
        if let Some(extra) = line.and_then(|l| l.strip_prefix("extra ")) {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(extra)
                .map_err(|_| invalid("proof extra line is not base64"))?;
            line = lines.next();
        }
        let index = line
            .and_then(|l| l.strip_prefix("index "))
            .and_then(parse_decimal)
            .ok_or_else(|| invalid("proof has no `index <N>` line"))?;
        let hashes = lines
            .map(|l| {
                hash_from_base64(l).ok_or_else(|| invalid("proof hash is not a base64 SHA-256"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if hashes.len() > super::merkle::MAX_PROOF_HASHES {
            return Err(invalid("proof has too many hashes"));
        }
        Ok(InclusionProof {
            index,
            hashes,
            head: head.as_bytes().to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::merkle::leaf_hash;

    fn body() -> HeadBody {
        HeadBody {
            run_id: "run-1".into(),
            size: 3,
            root: leaf_hash(b"root"),
            chain_checksum: "a".repeat(64),
            manifest_hash: "b".repeat(64),
        }
    }

    fn keys(seed: u8, name: &str) -> (SignerKey, VerifierKeys) {
        let (skey, vkey) = generate_key([seed; 32], name).unwrap();
        (
            SignerKey::parse(skey.as_bytes()).unwrap(),
            VerifierKeys::parse(vkey.as_bytes()).unwrap(),
        )
    }

    #[test]
    fn head_text_is_the_checkpoint_and_round_trips() {
        let b = body();
        let text = b.text();
        assert!(text.starts_with("bluetape-flow/run-1\n3\n"));
        assert!(text.ends_with(&format!(
            "chain 3 {}\nmanifest {}\n",
            "a".repeat(64),
            "b".repeat(64)
        )));
        assert_eq!(HeadBody::parse(text.as_bytes()).unwrap(), b);
        for bad in [
            text.replace("\n3\n", "\n03\n"),
            text.replace("\n3\n", "\n0\n"),
            text.replace("chain 3", "chain 4"),
            text.replace("bluetape-flow/", "other/"),
            text.trim_end().to_string(),
            format!("{text}extra\n"),
            text.replace("manifest ", "manifest  "),
        ] {
            assert!(HeadBody::parse(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn keys_are_go_note_texts_and_sign_what_they_open() {
        let (skey, vkey) = generate_key([7; 32], "auditor").unwrap();
        assert!(skey.starts_with("PRIVATE+KEY+auditor+"));
        assert!(vkey.starts_with("auditor+"));
        let signer = SignerKey::parse(format!("{skey}\n").as_bytes()).unwrap();
        assert!(vkey.starts_with(&format!("auditor+{}+", signer.key_hash())));
        assert!(!format!("{signer:?}").contains(&skey[20..]));
        let verifiers = VerifierKeys::parse(vkey.as_bytes()).unwrap();
        let note = signer.sign(&body()).unwrap();
        let opened = open_head(&note, &verifiers).unwrap();
        assert_eq!(opened.body, body());
        assert_eq!(
            opened.verified_by,
            vec![format!("auditor+{}", signer.key_hash())]
        );
        assert_eq!(parse_head(&note).unwrap().signatures, opened.verified_by);
        assert!(generate_key([1; 32], "bad name").is_err());
        assert!(generate_key([1; 32], "a+b").is_err());
        assert!(SignerKey::parse(vkey.as_bytes()).is_err());
        assert!(VerifierKeys::parse(skey.as_bytes()).is_err());
        assert!(VerifierKeys::parse(b"\n").is_err());
    }

    #[test]
    fn every_flipped_bit_of_a_note_or_key_is_refused() {
        let (signer, verifiers) = keys(3, "log");
        let note = signer.sign(&body()).unwrap();
        for i in 0..note.len() {
            for bit in 0..8 {
                let mut bad = note.clone();
                bad[i] ^= 1 << bit;
                assert!(open_head(&bad, &verifiers).is_err(), "byte {i} bit {bit}");
            }
        }
        let (skey, vkey) = generate_key([3; 32], "log").unwrap();
        for i in 0..vkey.len() {
            for bit in 0..8 {
                let mut bad = vkey.clone().into_bytes();
                bad[i] ^= 1 << bit;
                if let Ok(keys) = VerifierKeys::parse(&bad) {
                    assert!(open_head(&note, &keys).is_err(), "key byte {i} bit {bit}");
                }
            }
        }
        for i in 0..skey.len() {
            for bit in 0..8 {
                let mut bad = skey.clone().into_bytes();
                bad[i] ^= 1 << bit;
                if bad.last() == Some(&b'\n') {
                    continue;
                }
                assert!(
                    SignerKey::parse(&bad).is_err(),
                    "signer key byte {i} bit {bit}"
                );
            }
        }
    }

    #[test]
    fn unknown_keys_and_unsigned_notes_are_refused() {
        let (signer, _) = keys(3, "log");
        let (_, other) = keys(4, "log");
        let (_, third) = keys(5, "third");
        let note = signer.sign(&body()).unwrap();
        assert!(open_head(&note, &other).is_err());
        assert!(open_head(&note, &third).is_err());
        assert!(open_head(body().text().as_bytes(), &other).is_err());
        assert!(parse_head(body().text().as_bytes()).is_err());
        // A countersignature by a second key: either key opens it.
        let (witness, witness_keys) = keys(6, "witness");
        let both = witness.countersign(&note).unwrap();
        assert_eq!(
            open_head(&both, &witness_keys).unwrap().verified_by.len(),
            1
        );
        assert_eq!(parse_head(&both).unwrap().signatures.len(), 2);
    }

    #[test]
    fn proof_text_round_trips_and_hostile_text_is_typed() {
        let (signer, _) = keys(3, "log");
        let proof = InclusionProof {
            index: 2,
            hashes: vec![leaf_hash(b"1"), leaf_hash(b"2")],
            head: signer.sign(&body()).unwrap(),
        };
        let text = proof.to_text();
        assert!(text.starts_with(b"c2sp.org/tlog-proof@v1\nindex 2\n"));
        assert_eq!(InclusionProof::parse(&text).unwrap(), proof);
        let with_extra =
            String::from_utf8(text.clone())
                .unwrap()
                .replacen("\nindex", "\nextra AAAA\nindex", 1);
        assert_eq!(InclusionProof::parse(with_extra.as_bytes()).unwrap(), proof);
        for cut in 0..text.len() {
            let _ = InclusionProof::parse(&text[..cut]);
        }
        for bad in [
            &b""[..],
            b"c2sp.org/tlog-proof@v1\n",
            b"x\nindex 0\n\nh\n",
            b"\xff\n\n",
        ] {
            assert!(matches!(
                InclusionProof::parse(bad),
                Err(HeadError::Invalid(_))
            ));
        }
    }
}
