//! The audit bundle's format (contracts/bundle.md): member
//! names, their order and size limits, the canonical `index.json`, the
//! exact tar header of every member, and a strict streaming reader of the
//! tar. Pure: it reads and writes through `Read`/`Write` values only.
//!
//! A bundle is one POSIX (ustar) tar of `bluetape-bundle/<member>` files,
//! written by the `tar` crate with fixed metadata (mode 0644, uid/gid 0,
//! mtime 0, no user names), so the same run gives the same bytes. The
//! reader accepts exactly that form: every header must be byte for byte
//! the one we would write for the member the index names next, padding and
//! the end blocks must be zeros, and nothing may follow them. Anything else
//! is classified (link, device, absolute path, `..`, duplicate, extra,
//! changed) and refused; nothing is ever extracted.

use std::io::{Read, Write};

use serde_json::{Value, json};

use super::canonical;
use super::primitives::is_identifier;

/// The directory every member lives in inside the tar.
pub const ROOT: &str = "bluetape-bundle";
/// `format` of index.json.
pub const FORMAT: &str = "bluetape-bundle/1";
pub const INDEX: &str = "index.json";
pub const MANIFEST: &str = "manifest.json";
pub const POLICY: &str = "approval-policy.json";
/// The quarantined receipt a recovery run came from (a run has at most
/// one; its state-root name is too long for a ustar header).
pub const QUARANTINE: &str = "quarantine.receipt.jsonl";
/// Events per receipt segment: `receipt/<first sequence, 12 digits>.jsonl`.
/// Segments keep a publication incremental: only the last one changes.
pub const SEGMENT_EVENTS: u64 = 256;

const BLOCK: usize = 512;

/// What a bundle refuses, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BundleError {
    /// Not a tar we can read at all (exit 2): a broken header checksum, a
    /// truncated archive, an index that is not ours.
    Malformed(String),
    /// A well-formed archive whose content is refused (exit 3).
    Refused(String),
}

impl BundleError {
    pub fn message(&self) -> &str {
        match self {
            BundleError::Malformed(m) | BundleError::Refused(m) => m,
        }
    }
}

fn refused<T>(message: impl Into<String>) -> Result<T, BundleError> {
    Err(BundleError::Refused(message.into()))
}

fn malformed<T>(message: impl Into<String>) -> Result<T, BundleError> {
    Err(BundleError::Malformed(message.into()))
}

/// The kinds of member, in bundle order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    Index,
    Manifest,
    Policy,
    Head,
    Report,
    Receipt,
    Quarantine,
}

impl Class {
    /// Largest size of one member of this class.
    pub fn limit(self) -> u64 {
        match self {
            Class::Index => 16 << 20,
            Class::Manifest => 1 << 20,
            Class::Policy | Class::Head => 64 << 10,
            Class::Report => 1 << 20,
            Class::Receipt => 256 << 20,
            Class::Quarantine => 4 << 30,
        }
    }
}

fn is_hex(text: &str, len: usize) -> bool {
    text.len() == len
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The class of a member name, or `None` for a name a bundle never holds.
pub fn classify(name: &str) -> Option<Class> {
    let safe_file = |file: &str| {
        !file.is_empty()
            && file.len() <= 200
            && !file.starts_with('.')
            && file
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    };
    match name {
        INDEX => return Some(Class::Index),
        MANIFEST => return Some(Class::Manifest),
        POLICY => return Some(Class::Policy),
        QUARANTINE => return Some(Class::Quarantine),
        _ => {}
    }
    let (dir, file) = name.split_once('/')?;
    if !safe_file(file) {
        return None;
    }
    match dir {
        "heads" => {
            let (size, rest) = file.strip_suffix(".note")?.split_once('.')?;
            let size_ok = !size.is_empty()
                && !size.starts_with('0')
                && size.bytes().all(|b| b.is_ascii_digit());
            (size_ok && is_hex(rest, 8)).then_some(Class::Head)
        }
        // One bound report per kind: `reports/<kind>.json`.
        "reports" => file
            .strip_suffix(".json")
            .is_some_and(|kind| kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
            .then_some(Class::Report),
        "receipt" => {
            let first = file.strip_suffix(".jsonl")?;
            (first.len() == 12 && first.bytes().all(|b| b.is_ascii_digit()))
                .then_some(Class::Receipt)
        }
        _ => None,
    }
}

/// The name of the receipt segment holding event `sequence` (1-based).
pub fn segment_name(sequence: u64) -> String {
    let first = (sequence - 1) / SEGMENT_EVENTS * SEGMENT_EVENTS + 1;
    format!("receipt/{first:012}.jsonl")
}

/// The first sequence of a segment name.
pub fn segment_first(name: &str) -> Option<u64> {
    name.strip_prefix("receipt/")?
        .strip_suffix(".jsonl")?
        .parse()
        .ok()
}

/// The order of members: by class, then by name (segment names sort by
/// sequence; head names are compared by size).
pub fn order_key(name: &str) -> (Class, u64, String) {
    let class = classify(name).unwrap_or(Class::Quarantine);
    let number = match class {
        Class::Head => name
            .strip_prefix("heads/")
            .and_then(|f| f.split('.').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        _ => 0,
    };
    (class, number, name.to_string())
}

/// One member as the index lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub size: u64,
    pub sha256: String,
}

/// `index.json`: what the bundle holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    pub run_id: String,
    pub tool: String,
    /// The receipt's length and last checksum in this bundle.
    pub sequence: u64,
    pub checksum: String,
    /// Every member but the index itself, in bundle order.
    pub members: Vec<Member>,
}

impl Index {
    /// Canonical JSON plus LF: the index member's exact bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let members: Vec<Value> = self
            .members
            .iter()
            .map(|m| json!({"name": m.name, "sha256": m.sha256, "size": m.size}))
            .collect();
        let value = json!({
            "checksum": self.checksum,
            "format": FORMAT,
            "members": members,
            "run_id": self.run_id,
            "sequence": self.sequence,
            "tool": self.tool,
        });
        let mut bytes = canonical::to_vec(&value);
        bytes.push(b'\n');
        bytes
    }

    /// Parse and check an index: our format, canonical bytes, member names
    /// a bundle holds, each once, in bundle order, within their limits,
    /// and receipt segments that cover `1..=sequence` exactly.
    pub fn parse(bytes: &[u8]) -> Result<Index, BundleError> {
        let value: Value =
            serde_json::from_slice(bytes).or_else(|_| malformed("bundle index is not JSON"))?;
        let Some(map) = value.as_object() else {
            return malformed("bundle index is not a JSON object");
        };
        if map.get("format").and_then(Value::as_str) != Some(FORMAT) {
            return malformed(format!("bundle index is not format {FORMAT}"));
        }
        let text = |key: &str| -> Result<String, BundleError> {
            map.get(key)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| BundleError::Malformed(format!("bundle index has no '{key}'")))
        };
        let run_id = text("run_id")?;
        if !is_identifier(&run_id) {
            return refused("bundle index names an invalid run id");
        }
        let sequence = map
            .get("sequence")
            .and_then(Value::as_u64)
            .ok_or_else(|| BundleError::Malformed("bundle index has no 'sequence'".into()))?;
        let mut members = Vec::new();
        for item in map
            .get("members")
            .and_then(Value::as_array)
            .ok_or_else(|| BundleError::Malformed("bundle index has no 'members'".into()))?
        {
            let field = |key: &str| item.get(key);
            let (Some(name), Some(size), Some(sha256)) = (
                field("name").and_then(Value::as_str),
                field("size").and_then(Value::as_u64),
                field("sha256").and_then(Value::as_str),
            ) else {
                return malformed("bundle index lists a member without name, size and sha256");
            };
            members.push(Member {
                name: name.to_string(),
                size,
                sha256: sha256.to_string(),
            });
        }
        let index = Index {
            run_id,
            tool: text("tool")?,
            sequence,
            checksum: text("checksum")?,
            members,
        };
        if index.to_bytes() != bytes {
            return refused("bundle index is not in canonical form");
        }
        index.check()?;
        Ok(index)
    }

    fn check(&self) -> Result<(), BundleError> {
        let mut previous: Option<(Class, u64, String)> = None;
        let mut segments = 0u64;
        for member in &self.members {
            let Some(class) = classify(&member.name) else {
                return refused(format!(
                    "bundle index lists a member a bundle never holds: {:?}",
                    member.name
                ));
            };
            if class == Class::Index {
                return refused("bundle index lists itself");
            }
            if !is_hex(&member.sha256, 64) {
                return refused(format!("member {} has no SHA-256", member.name));
            }
            if member.size > class.limit() {
                return refused(format!(
                    "member {} is over its limit ({} bytes, at most {})",
                    member.name,
                    member.size,
                    class.limit()
                ));
            }
            let key = order_key(&member.name);
            if let Some(prev) = &previous {
                if prev.2 == key.2 {
                    return refused(format!("duplicate member {}", member.name));
                }
                if *prev > key {
                    return refused(format!("member {} is out of order", member.name));
                }
            }
            if class == Class::Receipt {
                if segment_first(&member.name) != Some(segments * SEGMENT_EVENTS + 1) {
                    return refused(format!("receipt segment {} is misplaced", member.name));
                }
                segments += 1;
            }
            if matches!(class, Class::Policy | Class::Manifest)
                && previous.as_ref().is_some_and(|p| p.0 == class)
            {
                return refused(format!("duplicate member {}", member.name));
            }
            previous = Some(key);
        }
        if self.sequence == 0 || segments != self.sequence.div_ceil(SEGMENT_EVENTS) {
            return refused("bundle receipt segments do not cover its sequence");
        }
        if !self.members.iter().any(|m| m.name == MANIFEST) {
            return refused("bundle has no manifest.json");
        }
        Ok(())
    }
}

/// The exact tar header of a member.
pub fn header(name: &str, size: u64) -> Result<tar::Header, BundleError> {
    let mut header = tar::Header::new_ustar();
    header
        .set_path(format!("{ROOT}/{name}"))
        .or_else(|e| refused(format!("member name {name} does not fit a tar header: {e}")))?;
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(size);
    header.set_mode(0o644);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(0);
    header.set_cksum();
    Ok(header)
}

/// Writes a bundle: the index first, then each member in index order.
pub struct BundleWriter<W: Write> {
    builder: tar::Builder<W>,
}

impl<W: Write> BundleWriter<W> {
    pub fn new(out: W) -> Self {
        let mut builder = tar::Builder::new(out);
        builder.mode(tar::HeaderMode::Deterministic);
        BundleWriter { builder }
    }

    /// Append one member (its bytes come from `data`, exactly `size`).
    pub fn append(&mut self, name: &str, size: u64, data: impl Read) -> std::io::Result<()> {
        let header =
            header(name, size).map_err(|e| std::io::Error::other(e.message().to_string()))?;
        self.builder.append(&header, data)
    }

    pub fn finish(self) -> std::io::Result<W> {
        self.builder.into_inner()
    }
}

/// A member header as found, when it is not the one expected: what it is.
fn describe_header(block: &[u8], expected: Option<&str>, seen: &[String]) -> BundleError {
    let header = tar::Header::from_byte_slice(block);
    if header.cksum().ok() != Some(checksum_of(block)) {
        return BundleError::Malformed("a tar header's checksum does not match".into());
    }
    let path = String::from_utf8_lossy(&header.path_bytes()).into_owned();
    let kind = header.entry_type();
    if kind.is_symlink() || kind.is_hard_link() {
        return BundleError::Refused(format!("member {path:?} is a link"));
    }
    if matches!(
        kind,
        tar::EntryType::Char | tar::EntryType::Block | tar::EntryType::Fifo
    ) {
        return BundleError::Refused(format!("member {path:?} is a device"));
    }
    if path.starts_with('/') {
        return BundleError::Refused(format!("member {path:?} has an absolute path"));
    }
    if path.split('/').any(|part| part == "..") {
        return BundleError::Refused(format!("member {path:?} has a '..' path"));
    }
    if !kind.is_file() {
        return BundleError::Refused(format!("member {path:?} is not a regular file"));
    }
    let name = path
        .strip_prefix(&format!("{ROOT}/"))
        .unwrap_or(&path)
        .to_string();
    if seen.contains(&name) {
        return BundleError::Refused(format!("duplicate member {name}"));
    }
    match expected {
        Some(expected) if expected == name => {
            BundleError::Refused(format!("member {name} has a changed header"))
        }
        Some(expected) => BundleError::Refused(format!(
            "member {name} is not the expected member {expected} (extra or missing member)"
        )),
        None => BundleError::Refused(format!("extra member {name}")),
    }
}

fn checksum_of(block: &[u8]) -> u32 {
    block
        .iter()
        .enumerate()
        .map(|(i, b)| {
            if (148..156).contains(&i) {
                32
            } else {
                u32::from(*b)
            }
        })
        .sum()
}

/// A strict streaming reader of a bundle tar.
pub struct TarReader<R: Read> {
    inner: R,
    /// Names already read (for duplicates).
    seen: Vec<String>,
    /// Bytes of the current member not yet read, and its padding.
    remaining: u64,
    padding: usize,
}

impl<R: Read> TarReader<R> {
    pub fn new(inner: R) -> Self {
        TarReader {
            inner,
            seen: Vec::new(),
            remaining: 0,
            padding: 0,
        }
    }

    fn read_block(&mut self, what: &str) -> Result<[u8; BLOCK], BundleError> {
        let mut block = [0u8; BLOCK];
        let mut filled = 0;
        while filled < BLOCK {
            match self.inner.read(&mut block[filled..]) {
                Ok(0) => return malformed(format!("the archive ends early (in {what})")),
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return malformed(format!("the archive could not be read: {e}")),
            }
        }
        Ok(block)
    }

    /// Start member `name` of `size` bytes: its header must be exactly ours.
    pub fn begin(&mut self, name: &str, size: u64) -> Result<(), BundleError> {
        let block = self.read_block("a header")?;
        let expected = header(name, size)?;
        if block != *expected.as_bytes() {
            if block.iter().all(|b| *b == 0) {
                return refused(format!("member {name} is missing"));
            }
            return Err(describe_header(&block, Some(name), &self.seen));
        }
        self.seen.push(name.to_string());
        self.remaining = size;
        self.padding = ((BLOCK as u64 - size % BLOCK as u64) % BLOCK as u64) as usize;
        Ok(())
    }

    /// The header of the first member (the index), whose size we learn
    /// from it.
    pub fn begin_index(&mut self) -> Result<u64, BundleError> {
        let block = self.read_block("the index header")?;
        let found = tar::Header::from_byte_slice(&block);
        let size = found.size().unwrap_or(u64::MAX);
        if size > Class::Index.limit() {
            if header(INDEX, 0).is_ok_and(|h| h.as_bytes()[..100] == block[..100]) {
                return refused("member index.json is over its limit");
            }
            return Err(describe_header(&block, Some(INDEX), &self.seen));
        }
        if block != *header(INDEX, size)?.as_bytes() {
            if block.iter().all(|b| *b == 0) {
                return malformed("the archive is empty");
            }
            return Err(describe_header(&block, Some(INDEX), &self.seen));
        }
        self.seen.push(INDEX.to_string());
        self.remaining = size;
        self.padding = ((BLOCK as u64 - size % BLOCK as u64) % BLOCK as u64) as usize;
        Ok(size)
    }

    /// Read the current member's data (0 at its end).
    pub fn read_data(&mut self, buf: &mut [u8]) -> Result<usize, BundleError> {
        if self.remaining == 0 {
            return Ok(0);
        }
        let want = buf.len().min(self.remaining.min(1 << 20) as usize);
        loop {
            match self.inner.read(&mut buf[..want]) {
                Ok(0) => return malformed("the archive ends early (in a member)"),
                Ok(n) => {
                    self.remaining -= n as u64;
                    return Ok(n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return malformed(format!("the archive could not be read: {e}")),
            }
        }
    }

    /// End the current member: all of it read, its padding zeros.
    pub fn end(&mut self, name: &str) -> Result<(), BundleError> {
        if self.remaining != 0 {
            return refused(format!("member {name} was not read to its end"));
        }
        let mut pad = [0u8; BLOCK];
        let padding = self.padding;
        let mut filled = 0;
        while filled < padding {
            match self.inner.read(&mut pad[filled..padding]) {
                Ok(0) => return malformed("the archive ends early (in padding)"),
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return malformed(format!("the archive could not be read: {e}")),
            }
        }
        if pad[..padding].iter().any(|b| *b != 0) {
            return refused(format!("member {name} has bytes in its padding"));
        }
        self.padding = 0;
        Ok(())
    }

    /// After the last member: two zero blocks, then nothing.
    pub fn finish(&mut self) -> Result<(), BundleError> {
        for _ in 0..2 {
            let block = self.read_block("the end of the archive")?;
            if block.iter().any(|b| *b != 0) {
                return Err(describe_header(&block, None, &self.seen));
            }
        }
        let mut rest = [0u8; 1];
        loop {
            match self.inner.read(&mut rest) {
                Ok(0) => return Ok(()),
                Ok(_) => return refused("bytes follow the end of the archive"),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return malformed(format!("the archive could not be read: {e}")),
            }
        }
    }
}

/// The member list for an index (sorted into bundle order).
pub fn sorted(mut members: Vec<Member>) -> Vec<Member> {
    members.sort_by_key(|m| order_key(&m.name));
    members
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(name: &str) -> Member {
        Member {
            name: name.into(),
            size: 1,
            sha256: "a".repeat(64),
        }
    }

    fn index(names: &[&str], sequence: u64) -> Index {
        Index {
            run_id: "run-1".into(),
            tool: "t".into(),
            sequence,
            checksum: "c".into(),
            members: names.iter().map(|n| member(n)).collect(),
        }
    }

    #[test]
    fn names_are_classified_strictly() {
        assert_eq!(classify("heads/12.0123abcd.note"), Some(Class::Head));
        assert_eq!(classify("receipt/000000000001.jsonl"), Some(Class::Receipt));
        assert_eq!(
            classify("reports/fresh_session_handoff.json"),
            Some(Class::Report)
        );
        assert_eq!(classify(QUARANTINE), Some(Class::Quarantine));
        for bad in [
            "../x",
            "heads/../x",
            "/abs",
            "reports/.hidden.json",
            "reports/r-1.json",
            "quarantine/x.receipt.jsonl",
            "receipt/1.jsonl",
            "heads/012.0123abcd.note",
            "x/y/z",
            "receipt.jsonl",
        ] {
            assert_eq!(classify(bad), None, "{bad}");
        }
    }

    #[test]
    fn segments_cover_the_sequence() {
        assert_eq!(segment_name(1), "receipt/000000000001.jsonl");
        assert_eq!(segment_name(256), "receipt/000000000001.jsonl");
        assert_eq!(segment_name(257), "receipt/000000000257.jsonl");
        let ok = index(
            &[
                MANIFEST,
                "receipt/000000000001.jsonl",
                "receipt/000000000257.jsonl",
            ],
            300,
        );
        assert_eq!(Index::parse(&ok.to_bytes()).unwrap(), ok);
        let short = index(&[MANIFEST, "receipt/000000000001.jsonl"], 300);
        assert!(Index::parse(&short.to_bytes()).is_err());
        let disorder = index(&["receipt/000000000001.jsonl", MANIFEST], 3);
        assert!(Index::parse(&disorder.to_bytes()).is_err());
        let dup = index(
            &[
                MANIFEST,
                "heads/3.0123abcd.note",
                "heads/3.0123abcd.note",
                "receipt/000000000001.jsonl",
            ],
            3,
        );
        assert!(Index::parse(&dup.to_bytes()).is_err());
    }

    #[test]
    fn a_bundle_round_trips_and_every_flipped_byte_is_refused() {
        let mut out = Vec::new();
        let mut writer = BundleWriter::new(&mut out);
        writer.append(INDEX, 3, &b"abc"[..]).unwrap();
        writer.append(MANIFEST, 2, &b"xy"[..]).unwrap();
        writer.finish().unwrap();
        let read = |bytes: &[u8]| -> Result<Vec<u8>, BundleError> {
            let mut reader = TarReader::new(bytes);
            let size = reader.begin_index()?;
            let mut data = vec![0u8; size as usize];
            let n = reader.read_data(&mut data)?;
            reader.end(INDEX)?;
            reader.begin(MANIFEST, 2)?;
            let mut two = [0u8; 2];
            reader.read_data(&mut two)?;
            reader.end(MANIFEST)?;
            reader.finish()?;
            data.truncate(n);
            data.extend_from_slice(&two);
            Ok(data)
        };
        assert_eq!(read(&out).unwrap(), b"abcxy");
        for i in 0..out.len() {
            let mut bad = out.clone();
            bad[i] ^= 0x01;
            assert_ne!(read(&bad).ok(), Some(b"abcxy".to_vec()), "byte {i}");
        }
        assert!(read(&out[..out.len() - 1]).is_err());
        let mut longer = out.clone();
        longer.push(0);
        assert!(read(&longer).is_err());
    }
}
