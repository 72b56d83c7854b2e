//! The audit bundle (contracts/bundle.md): `bundle-export`
//! writes one deterministic tar of a run's members; `bundle-verify`
//! streams one back without a state root, extracting nothing, and checks
//! everything a state root's `verify` would, plus the members' binding.
//! The verification core reads members from any [`MemberSource`]: the tar
//! here, git objects in `publish.rs`.

use crate::receipt::json_ref::{JsonRef, ObjectRef};
use crate::store::root::StateRoot;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::error::{ErrorKind, FlowError, FlowResult};
use super::ledger::OpenRun;
use crate::coordinator::OnRefusal;
use crate::coordinator::approval::ApprovalLedger;
use crate::coordinator::raced::Raced;
use crate::coordinator::report_refusal::ReportRefusal;
use crate::coordinator::{CoordinatorState, ReplayPolicy, RunOrigin};
use crate::receipt::bundle::{
    BundleError, BundleWriter, Class, INDEX, Index, MANIFEST, Member, POLICY, QUARANTINE,
    SEGMENT_EVENTS, TarReader, classify, segment_first, segment_name,
};
use crate::receipt::manifest::{RunManifest, load_run_manifest};
use crate::receipt::merkle::{Hash, RootAccumulator, hash_to_base64};
use crate::receipt::rules::Family;
use crate::receipt::signed_head::{HeadBody, VerifierKeys, open_head, parse_head};
use crate::receipt::verify::{ChainPosition, ChainVerifier, StreamStop};
use crate::store::bundle::{file_digest, open_input, read_member_file};
use crate::store::heads::read_small;

/// Receipts at least this long are verified on worker threads.
const PARALLEL_FROM_BYTES: u64 = 1 << 20;

/// The tool named in every index.
pub fn tool() -> String {
    format!("bluetape-flow {}", env!("CARGO_PKG_VERSION"))
}

pub fn bundle_error(e: BundleError) -> FlowError {
    match e {
        BundleError::Malformed(m) => ErrorKind::Contract(format!("bundle is malformed: {m}")).into(),
        // The bundle (a file or a publication) does not hold: a copy to
        // fetch again, not a state root to diagnose (DEVIATIONS 90).
        BundleError::Refused(m) => ErrorKind::ReceiptCorrupt(format!("bundle refused: {m}"))
            .hinted("this bundle does not hold as bundle-export or publish wrote it (the message says where): fetch a fresh copy from where the run lives (bundle-export --run-id {run_id} --out FILE, or git fetch origin 'refs/bluetape/*:refs/bluetape/*') and verify that; only the state root's own verify --run-id {run_id} tells whether the run itself is damaged"),
    }
}

fn refused(message: impl Into<String>) -> FlowError {
    bundle_error(BundleError::Refused(message.into()))
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A run verified and replayed from its own state root (export, publish,
/// attest): every event checked, the final state, what the first event
/// says about a recovery.
pub struct Replayed {
    pub run: OpenRun,
    pub state: CoordinatorState,
    pub position: ChainPosition,
    pub ledger: ApprovalLedger,
    /// `recovery_quarantine_path` and `_hash` of a recovery run.
    pub quarantine: Option<(String, String)>,
    pub recovery_of: Option<String>,
    /// The timestamp of the event that completed the run.
    pub completed_at: Option<String>,
}

/// The timestamp of a `run_completed` event (alone or in a transaction).
fn completion_time(event: &ObjectRef<'_>) -> Option<String> {
    let completes =
        |e: &ObjectRef<'_>| e.get("event_type").and_then(JsonRef::as_str) == Some("run_completed");
    let inside = event
        .get("metadata")
        .and_then(|m| m.get("intents"))
        .and_then(JsonRef::as_array)
        .is_some_and(|intents| intents.iter().filter_map(JsonRef::as_object).any(completes));
    (completes(event) || inside)
        .then(|| {
            event
                .get("timestamp")
                .and_then(JsonRef::as_str)
                .map(str::to_string)
        })
        .flatten()
}

fn first_event_facts(event: &ObjectRef<'_>) -> (Option<(String, String)>, Option<String>) {
    let meta = event.get("metadata");
    let text = |key: &str| {
        meta.and_then(|m| m.get(key))
            .and_then(JsonRef::as_str)
            .map(str::to_string)
    };
    let quarantine = match (
        text("recovery_quarantine_path"),
        text("recovery_quarantine_hash"),
    ) {
        (Some(path), Some(hash)) => Some((path, hash)),
        _ => None,
    };
    (quarantine, text("recovery_original_run_id"))
}

/// Full verification and replay of a Phase 2 run (a gate's read).
pub fn replay_full(root: &StateRoot, run_id: &str) -> FlowResult<Replayed> {
    let mut ledger = ApprovalLedger::default();
    let mut first = None;
    let mut completed_at = None;
    let (run, state, position) = super::rebuild::replay_whole(
        root,
        run_id,
        "bundles, publications and attestations need a Phase 2 (manifest 1.1) run",
        |event, _| {
            if first.is_none() {
                first = Some(first_event_facts(event));
            }
            if let Some(at) = completion_time(event) {
                completed_at = Some(at);
            }
            ledger.observe_ref(event);
            Ok(())
        },
    )?;
    let (quarantine, recovery_of) = first.unwrap_or((None, None));
    Ok(Replayed {
        run,
        state,
        position,
        ledger,
        quarantine,
        recovery_of,
        completed_at,
    })
}

/// Where a member's bytes come from when it is written.
pub enum Content {
    Bytes(Vec<u8>),
    /// `size` bytes of the receipt from `offset`.
    Receipt {
        offset: u64,
    },
    File(PathBuf),
}

/// The members of a run's bundle, index first.
pub struct Plan {
    pub index: Index,
    pub index_bytes: Vec<u8>,
    /// In index order, beside the index's members.
    pub contents: Vec<Content>,
}

/// Gather the members of a verified run (every bound report, the policy,
/// the quarantined source, the stored heads that hold).
pub fn plan(replayed: &Replayed) -> FlowResult<Plan> {
    // A stored head the receipt no longer extends is damage: refuse.
    super::transparency::verify_heads(&replayed.run, &replayed.position, None, None)?;
    plan_with(replayed, &[])
}

/// Receipt segments already known (a publication's): their members, kept
/// as they are; the rest of the receipt is cut from after them.
pub fn plan_with(replayed: &Replayed, kept: &[Member]) -> FlowResult<Plan> {
    let run = &replayed.run;
    let root = &run.dir.root;
    let mut members: Vec<(Member, Content)> = Vec::new();
    let mut add = |name: String, bytes: Vec<u8>| {
        let member = Member {
            name,
            size: bytes.len() as u64,
            sha256: sha256_hex(&bytes),
        };
        members.push((member, Content::Bytes(bytes)));
    };
    let manifest = run.dir.read_manifest()?;
    add(MANIFEST.into(), manifest);
    if replayed.ledger.binding.is_some() || crate::store::approval::policy_file_exists(&run.dir) {
        let bytes = read_member_file(
            root.at(&crate::store::approval::policy_path(&run.dir)),
            "approval policy file",
            Class::Policy.limit(),
        )?;
        add(POLICY.into(), bytes);
    }
    for head in run.dir.stored_heads()? {
        let name = head.path.file_name().unwrap_or_default().to_string_lossy();
        let bytes = read_small(&root.at(&head.path), None)?;
        add(format!("heads/{name}"), bytes);
    }
    for (kind, meta) in replayed.state.reports() {
        let text = |key: &str| meta.get(key).and_then(Value::as_str).unwrap_or_default();
        let path = text("report_path");
        let name = format!("reports/{kind}.json");
        if classify(&name) != Some(Class::Report) || !path.starts_with("reports/") {
            return Err(ErrorKind::ReceiptCorrupt(format!(
                "bound report {path:?} of kind {kind:?} is not one a bundle holds"
            ))
            .into());
        }
        let bytes = read_member_file(root.at(&root.join(path)), "report", Class::Report.limit())?;
        if sha256_hex(&bytes) != text("report_checksum") {
            return Err(FlowError::from(ReportRefusal::BoundFileChanged {
                path: path.to_string(),
                bound: text("report_checksum").to_string(),
                found: Some(sha256_hex(&bytes)),
            }));
        }
        add(name, bytes);
    }
    let mut offset = 0u64;
    for member in kept {
        members.push((member.clone(), Content::Receipt { offset }));
        offset += member.size;
    }
    let segments =
        run.dir
            .receipt_segments(offset, replayed.position.byte_length, SEGMENT_EVENTS)?;
    for (i, (size, sha256)) in segments.into_iter().enumerate() {
        let member = Member {
            name: segment_name((kept.len() + i) as u64 * SEGMENT_EVENTS + 1),
            size,
            sha256,
        };
        members.push((member, Content::Receipt { offset }));
        offset += size;
    }
    if offset != replayed.position.byte_length {
        return Err(FlowError::from(Raced::BundleRead));
    }
    if let Some((path, hash)) = &replayed.quarantine {
        if !path.starts_with("quarantine/") || path.contains("..") {
            return Err(ErrorKind::ReceiptCorrupt(format!(
                "quarantine path {path:?} is not one a bundle holds"
            ))
            .into());
        }
        let file = root.join(path);
        let (size, sha256) = file_digest(root.at(&file), "quarantined receipt")?;
        if &sha256 != hash {
            return Err(ErrorKind::ReceiptCorrupt(format!(
                "quarantined receipt {path} does not match its recorded hash"
            ))
            .into());
        }
        members.push((
            Member {
                name: QUARANTINE.into(),
                size,
                sha256,
            },
            Content::File(file),
        ));
    }
    members.sort_by_key(|(m, _)| crate::receipt::bundle::order_key(&m.name));
    let (list, contents): (Vec<Member>, Vec<Content>) = members.into_iter().unzip();
    let index = Index {
        run_id: run.dir.run_id.to_string(),
        tool: tool(),
        sequence: replayed.position.sequence,
        checksum: replayed.position.checksum.clone(),
        members: list,
    };
    let index_bytes = index.to_bytes();
    Ok(Plan {
        index,
        index_bytes,
        contents,
    })
}

/// Reads `size` bytes and checks their SHA-256 at the end.
struct Checked<R> {
    inner: R,
    hasher: Sha256,
}

impl<R: Read> Read for Checked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

/// Open one member's content as a reader, and its check.
pub fn with_content<T>(
    replayed: &Replayed,
    member: &Member,
    content: &Content,
    use_it: impl FnOnce(&mut dyn Read) -> std::io::Result<T>,
) -> FlowResult<T> {
    let changed = || {
        FlowError::from(Raced::MemberChanged {
            member: member.name.clone(),
        })
    };
    let io = |e: std::io::Error| ErrorKind::Contract(format!("{}: {e}", member.name));
    let (value, hasher) = match content {
        Content::Bytes(bytes) => {
            let mut reader = Checked {
                inner: &bytes[..],
                hasher: Sha256::new(),
            };
            (use_it(&mut reader).map_err(io)?, reader.hasher)
        }
        Content::Receipt { offset } => {
            use std::io::Seek;
            let mut file = replayed.run.dir.receipt_reader()?;
            file.seek(std::io::SeekFrom::Start(*offset)).map_err(io)?;
            let mut reader = Checked {
                inner: std::io::BufReader::with_capacity(1 << 16, file).take(member.size),
                hasher: Sha256::new(),
            };
            (use_it(&mut reader).map_err(io)?, reader.hasher)
        }
        Content::File(path) => {
            let root = &replayed.run.dir.root;
            let file = open_input(root.at(path), "quarantined receipt")?;
            let mut reader = Checked {
                inner: std::io::BufReader::with_capacity(1 << 16, file).take(member.size),
                hasher: Sha256::new(),
            };
            (use_it(&mut reader).map_err(io)?, reader.hasher)
        }
    };
    if hex::encode(hasher.finalize()) != member.sha256 {
        return Err(changed());
    }
    Ok(value)
}

/// A writer that hashes what passes.
struct Hashing<W> {
    inner: W,
    hasher: Sha256,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// What `bundle-export` answers: the bundle written and the head it holds.
#[derive(Debug, Serialize)]
pub struct BundleWritten {
    /// Its members, the index included.
    pub members: usize,
    /// The receipt's length and last checksum in the bundle.
    pub sequence: u64,
    pub checksum: String,
    pub path: String,
    pub run_id: String,
    /// The SHA-256 of the bundle file.
    pub sha256: String,
}

/// `bundle-export`: verify and replay the run, then write its bundle to
/// `out` (outside the state root, temp + rename, never through a symlink,
/// never over a file without `force`).
pub fn export(
    root: &StateRoot,
    run_id: &str,
    out: &Path,
    cwd: &Path,
    force: bool,
) -> FlowResult<BundleWritten> {
    let replayed = replay_full(root, run_id)?;
    let plan = plan(&replayed)?;
    let mut failure: Option<FlowError> = None;
    let mut digest = String::new();
    let written = crate::store::output::write_view_with(out, cwd, root, force, |file, temp| {
        let io = |e: std::io::Error| crate::store::StoreError::io(&e, temp);
        let buffered = std::io::BufWriter::with_capacity(1 << 16, &mut *file);
        let mut writer = BundleWriter::new(Hashing {
            inner: buffered,
            hasher: Sha256::new(),
        });
        writer
            .append(INDEX, plan.index_bytes.len() as u64, &plan.index_bytes[..])
            .map_err(io)?;
        for (member, content) in plan.index.members.iter().zip(&plan.contents) {
            let result = with_content(&replayed, member, content, |reader| {
                writer.append(&member.name, member.size, reader)
            });
            if let Err(e) = result {
                failure = Some(e);
                return Err(crate::store::StoreError::invalid("export stopped"));
            }
        }
        let mut hashing = writer.finish().map_err(io)?;
        hashing.flush().map_err(io)?;
        digest = hex::encode(hashing.hasher.clone().finalize());
        Ok(())
    });
    let path = match (written, failure) {
        (_, Some(e)) => return Err(e),
        (Err(e), None) => return Err(e.into()),
        (Ok(path), None) => path,
    };
    Ok(BundleWritten {
        members: plan.index.members.len() + 1,
        sequence: plan.index.sequence,
        checksum: plan.index.checksum.clone(),
        path: path.to_string_lossy().into_owned(),
        run_id: run_id.to_string(),
        sha256: digest,
    })
}

// ------------------------------------------------------------------ verify

/// Members read one after another, in index order.
pub trait MemberSource: Send {
    fn begin(&mut self, member: &Member) -> Result<(), BundleError>;
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, BundleError>;
    fn end(&mut self, member: &Member) -> Result<(), BundleError>;
}

impl<R: Read + Send> MemberSource for TarReader<R> {
    fn begin(&mut self, member: &Member) -> Result<(), BundleError> {
        TarReader::begin(self, &member.name, member.size)
    }
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, BundleError> {
        self.read_data(buf)
    }
    fn end(&mut self, member: &Member) -> Result<(), BundleError> {
        TarReader::end(self, &member.name)
    }
}

fn mismatch(member: &Member) -> BundleError {
    BundleError::Refused(format!(
        "member {} does not match its size and SHA-256 in the index",
        member.name
    ))
}

/// A whole small member, checked against the index.
fn read_whole(source: &mut dyn MemberSource, member: &Member) -> Result<Vec<u8>, BundleError> {
    source.begin(member)?;
    let mut bytes = vec![0u8; member.size as usize];
    let mut filled = 0;
    while filled < bytes.len() {
        let n = source.read(&mut bytes[filled..])?;
        if n == 0 {
            return Err(mismatch(member));
        }
        filled += n;
    }
    source.end(member)?;
    if sha256_hex(&bytes) != member.sha256 {
        return Err(mismatch(member));
    }
    Ok(bytes)
}

/// A streamed member's SHA-256 against the index.
fn digest_streamed(source: &mut dyn MemberSource, member: &Member) -> Result<(), BundleError> {
    source.begin(member)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let n = source.read(&mut buf)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        hasher.update(&buf[..n]);
    }
    source.end(member)?;
    if total != member.size || hex::encode(hasher.finalize()) != member.sha256 {
        return Err(mismatch(member));
    }
    Ok(())
}

/// The receipt segments as one stream: each segment checked (size,
/// SHA-256, whole lines, its number of events) at its end, and every
/// line's leaf hash folded into the tree, with the root kept at the sizes
/// a head names.
struct Segments<'s> {
    source: &'s mut dyn MemberSource,
    members: &'s [Member],
    sequence: u64,
    current: usize,
    started: bool,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    hasher: Sha256,
    read: u64,
    lines: u64,
    leaf: Sha256,
    last: u8,
    tree: RootAccumulator,
    wanted: BTreeSet<u64>,
    roots: BTreeMap<u64, Hash>,
    error: Option<BundleError>,
}

impl Segments<'_> {
    fn fail(&mut self, e: BundleError) -> std::io::Error {
        let message = e.message().to_string();
        self.error = Some(e);
        std::io::Error::other(message)
    }

    fn close_segment(&mut self) -> Result<(), BundleError> {
        let member = &self.members[self.current];
        let first = segment_first(&member.name).unwrap_or(1);
        let expected = (self.sequence - first + 1).min(SEGMENT_EVENTS);
        let hash = hex::encode(std::mem::take(&mut self.hasher).finalize());
        if self.read != member.size || hash != member.sha256 {
            return Err(mismatch(member));
        }
        if self.lines != expected || self.last != b'\n' {
            return Err(BundleError::Refused(format!(
                "receipt segment {} does not hold events {first} to {}",
                member.name,
                first + expected - 1
            )));
        }
        self.source.end(member)
    }

    fn absorb(&mut self, n: usize) {
        let data = &self.buf[..n];
        self.hasher.update(data);
        self.read += n as u64;
        let mut rest = data;
        while let Some(i) = rest.iter().position(|b| *b == b'\n') {
            self.leaf.update(&rest[..i]);
            let leaf = Hash(
                std::mem::replace(&mut self.leaf, leaf_hasher())
                    .finalize()
                    .into(),
            );
            self.tree.push_leaf(leaf);
            if self.wanted.contains(&self.tree.leaves()) {
                self.roots.insert(self.tree.leaves(), self.tree.root());
            }
            self.lines += 1;
            rest = &rest[i + 1..];
        }
        self.leaf.update(rest);
        if let Some(b) = data.last() {
            self.last = *b;
        }
    }
}

fn leaf_hasher() -> Sha256 {
    let mut h = Sha256::new();
    h.update([0u8]);
    h
}

impl Read for Segments<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(out.len());
        out[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Segments<'_> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        while self.pos >= self.len {
            if self.current >= self.members.len() {
                return Ok(&[]);
            }
            if !self.started {
                let member = &self.members[self.current];
                if let Err(e) = self.source.begin(member) {
                    return Err(self.fail(e));
                }
                self.started = true;
                self.read = 0;
                self.lines = 0;
                self.last = 0;
            }
            let n = match self.source.read(&mut self.buf) {
                Ok(n) => n,
                Err(e) => return Err(self.fail(e)),
            };
            if n == 0 {
                if let Err(e) = self.close_segment() {
                    return Err(self.fail(e));
                }
                self.current += 1;
                self.started = false;
                continue;
            }
            self.absorb(n);
            self.pos = 0;
            self.len = n;
        }
        Ok(&self.buf[self.pos..self.len])
    }

    fn consume(&mut self, amt: usize) {
        self.pos = (self.pos + amt).min(self.len);
    }
}

/// What a verified bundle says.
pub struct Verified {
    pub index: Index,
    pub manifest: RunManifest,
    pub state: CoordinatorState,
    pub position: ChainPosition,
    pub ledger: ApprovalLedger,
    pub recovery_of: Option<String>,
    pub root: Hash,
    /// Every head that held (name, body).
    pub heads: Vec<(String, HeadBody)>,
    /// With keys: the replayed state, ledger and position at the largest
    /// size a signed head covers (trust-model §2 promise 6): what the
    /// signatures vouch for. Everything after it is the unsigned tail.
    pub signed: Option<(CoordinatorState, ApprovalLedger, ChainPosition)>,
}

/// Check every member of a bundle read from `source` (after its index),
/// in index order. `extra_sizes`: more sizes whose roots the caller
/// wants (`--head`).
pub fn verify_members(
    index: Index,
    source: &mut dyn MemberSource,
    keys: Option<&VerifierKeys>,
    external: Option<&[u8]>,
) -> FlowResult<Verified> {
    let e = bundle_error;
    let members = index.members.clone();
    let mut at = 0usize;
    // manifest.json comes first (the index's order guarantees it).
    let manifest_member = &members[at];
    if manifest_member.name != MANIFEST {
        return Err(refused("bundle has no manifest.json"));
    }
    let manifest_bytes = read_whole(source, manifest_member).map_err(e)?;
    at += 1;
    let manifest = load_run_manifest(&manifest_bytes).map_err(|err| {
        let error = FlowError::from(err);
        match error.kind() {
            // A snapshot of a manifest this tool does not speak: exit 4.
            ErrorKind::IncompatibleManifest(_) => error,
            _ => refused(format!(
                "manifest.json is not a run manifest snapshot: {}",
                error.message()
            )),
        }
    })?;
    if manifest.contract.family != Family::V1_1 {
        return Err(
            ErrorKind::Unsupported("bundles need a Phase 2 (manifest 1.1) run".into()).into(),
        );
    }
    let open = |bytes: &[u8]| match keys {
        Some(keys) => open_head(bytes, keys),
        None => parse_head(bytes),
    };
    let mut policy_bytes = None;
    let mut heads: Vec<(String, HeadBody)> = Vec::new();
    let mut reports: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    while at < members.len() {
        let member = &members[at];
        match classify(&member.name) {
            Some(Class::Policy) => policy_bytes = Some(read_whole(source, member).map_err(e)?),
            Some(Class::Head) => {
                let bytes = read_whole(source, member).map_err(e)?;
                let head = open(&bytes).map_err(|err| {
                    refused(format!(
                        "signed head {} does not hold: {}",
                        member.name,
                        err.message()
                    ))
                })?;
                heads.push((member.name.clone(), head.body));
            }
            Some(Class::Report) => {
                let bytes = read_whole(source, member).map_err(e)?;
                reports.insert(member.name.clone(), bytes);
            }
            _ => break,
        }
        at += 1;
    }
    let mut external_body = None;
    if let Some(bytes) = external {
        let head = open(bytes)
            .map_err(|err| refused(format!("--head does not hold: {}", err.message())))?;
        external_body = Some(head.body);
    }
    if keys.is_some() && heads.is_empty() && external_body.is_none() {
        // Nothing to check the keys against: a usage error, not damage
        // (a bundle whose heads were removed still fails, exit 2).
        return Err(crate::coordinator::decide::InputRule::BundleNoSignedHead.into());
    }
    let segment_end = members[at..]
        .iter()
        .position(|m| classify(&m.name) != Some(Class::Receipt))
        .map_or(members.len(), |i| at + i);
    let segments = &members[at..segment_end];
    // The largest size the signatures reach (every head must hold below).
    let signed_size = keys.and(
        heads
            .iter()
            .map(|(_, h)| h.size)
            .chain(external_body.iter().map(|h| h.size))
            .max(),
    );
    let mut signed = None;
    let mut wanted: BTreeSet<u64> = heads.iter().map(|(_, h)| h.size).collect();
    wanted.extend(external_body.iter().map(|h| h.size));
    wanted.insert(index.sequence);
    // Replay under the bundle's own manifest snapshot and policy.
    let origin = RunOrigin::of_snapshot(manifest.run.as_ref())
        .map_err(|_| refused("the manifest's run owner metadata is invalid"))?;
    let policy = ReplayPolicy::from_contract(&manifest.contract.contract).with_approval_file(
        policy_bytes
            .clone()
            .ok_or_else(|| "approval policy file is missing".to_string()),
    );
    let mut state = CoordinatorState::new(&origin);
    let mut ledger = ApprovalLedger::default();
    let mut first = None;
    let mut checksums: BTreeMap<u64, String> = BTreeMap::new();
    let mut verifier =
        ChainVerifier::new(&manifest, &index.run_id, ChainPosition::genesis(&manifest));
    let mut stream = Segments {
        source,
        members: segments,
        sequence: index.sequence,
        current: 0,
        started: false,
        buf: vec![0u8; 1 << 16],
        pos: 0,
        len: 0,
        hasher: Sha256::new(),
        read: 0,
        lines: 0,
        leaf: leaf_hasher(),
        last: 0,
        tree: RootAccumulator::default(),
        wanted: wanted.clone(),
        roots: BTreeMap::new(),
        error: None,
    };
    // Liveness digests leave the lanes every segment: memory stays bounded
    // (16 bytes per heartbeat) whatever the receipt's length.
    let spilled = std::sync::Arc::new(crate::coordinator::state::CompactDigests::default());
    let mut replay = |event: &ObjectRef<'_>, position: &ChainPosition| {
        if first.is_none() {
            first = Some(first_event_facts(event));
        }
        if wanted.contains(&position.sequence) {
            checksums.insert(position.sequence, position.checksum.clone());
        }
        ledger.observe_ref(event);
        state
            .apply_ref(event, &policy, OnRefusal::Spoil)
            .map_err(|e| e.to_string())?;
        if signed_size == Some(position.sequence) {
            signed = Some((state.clone(), ledger.clone(), position.clone()));
        }
        if position.sequence.is_multiple_of(SEGMENT_EVENTS) {
            state.spill_liveness_digests(&spilled)?;
        }
        Ok(())
    };
    // Long receipts are parsed on worker threads (the same checks, the
    // events handed on in order for the replay).
    let receipt_bytes: u64 = segments.iter().map(|m| m.size).sum();
    let outcome = if receipt_bytes >= PARALLEL_FROM_BYTES {
        verifier.verify_stream_parallel_events(&mut stream, &mut replay)
    } else {
        verifier.verify_stream(&mut stream, &mut replay)
    };
    match outcome {
        Err(io) => {
            return Err(match stream.error.take() {
                Some(err) => e(err),
                None => e(BundleError::Malformed(io.to_string())),
            });
        }
        Ok(Err(StreamStop::Damage(damage))) => {
            return Err(refused(format!("receipt: {}", damage.message())));
        }
        Ok(Err(StreamStop::Rejected(message))) => {
            return Err(refused(format!("receipt does not replay: {message}")));
        }
        Ok(Ok(())) => {}
    }
    if let Some(err) = stream.error.take() {
        return Err(e(err));
    }
    if stream.current != segments.len() {
        return Err(refused("receipt segments were not all read"));
    }
    let position = verifier.position().clone();
    if position.sequence != index.sequence || position.checksum != index.checksum {
        return Err(refused(
            "the receipt's length or last checksum is not the index's",
        ));
    }
    let roots = std::mem::take(&mut stream.roots);
    let root = *roots
        .get(&position.sequence)
        .ok_or_else(|| refused("the receipt has no tree root"))?;
    // Heads: of this run, this manifest, and extended by this receipt.
    let check_head = |name: &str, body: &HeadBody| -> FlowResult<()> {
        let why = if body.run_id != index.run_id {
            Some(format!("it is a head of run {}", body.run_id))
        } else if body.manifest_hash != manifest.contract.hash {
            Some("its manifest hash is not the run's".into())
        } else if body.size > position.sequence {
            Some(format!(
                "it is for {} events and the receipt has {}",
                body.size, position.sequence
            ))
        } else if roots.get(&body.size) != Some(&body.root) {
            Some(format!(
                "the tree over the first {} events has another root",
                body.size
            ))
        } else if checksums.get(&body.size) != Some(&body.chain_checksum) {
            Some(format!("event {} has another checksum", body.size))
        } else {
            None
        };
        match why {
            Some(why) => Err(refused(format!("signed head {name} does not hold: {why}"))),
            None => Ok(()),
        }
    };
    for (name, body) in &heads {
        check_head(name, body)?;
        let expected = format!("heads/{}.", body.size);
        if !name.starts_with(&expected) {
            return Err(refused(format!(
                "signed head {name} is named for another size"
            )));
        }
    }
    if let Some(body) = &external_body {
        check_head("--head", body)?;
    }
    // Reports: each bound one present with its bytes, bound to its head.
    for (kind, meta) in state.reports() {
        let text = |key: &str| meta.get(key).and_then(Value::as_str).unwrap_or_default();
        let path = format!("reports/{kind}.json");
        let Some(bytes) = reports.remove(&path) else {
            return Err(refused(format!("bound report {path} is missing")));
        };
        if sha256_hex(&bytes) != text("report_checksum") {
            return Err(refused(format!("report {path} is not the bound one")));
        }
        let payload: Value = serde_json::from_slice(&bytes)
            .map_err(|_| refused(format!("report {path} is not JSON")))?;
        if payload.get("receipt_head").and_then(Value::as_str) != Some(text("report_receipt_head"))
            || payload.get("run_id").and_then(Value::as_str) != Some(index.run_id.as_str())
            || payload.get("manifest_hash").and_then(Value::as_str)
                != Some(manifest.contract.hash.as_str())
        {
            return Err(refused(format!(
                "report {path} is not bound to this run's receipt head"
            )));
        }
    }
    if let Some(extra) = reports.keys().next() {
        return Err(refused(format!("extra member {extra}: no event binds it")));
    }
    // The policy: present exactly when the run binds one, with its bytes.
    match (&ledger.binding, &policy_bytes) {
        (Some(binding), Some(bytes)) => {
            crate::coordinator::approval::ApprovalPolicy::from_frozen(bytes, binding).map_err(
                |why| {
                    refused(format!(
                        "approval-policy.json is not the policy the run binds: {why}"
                    ))
                },
            )?;
        }
        (Some(_), None) => return Err(refused("member approval-policy.json is missing")),
        (None, Some(_)) => {
            return Err(refused(
                "extra member approval-policy.json: the run binds no policy",
            ));
        }
        (None, None) => {}
    }
    // The quarantined source of a recovery run.
    let (quarantine, recovery_of) = first.unwrap_or((None, None));
    let rest = &members[segment_end..];
    match (&quarantine, rest) {
        (None, []) => {}
        (Some((_, hash)), [member]) if member.name == QUARANTINE && &member.sha256 == hash => {
            digest_streamed(source, member).map_err(e)?;
        }
        (Some((path, _)), [member]) if member.name == QUARANTINE => {
            return Err(refused(format!(
                "{QUARANTINE} is not the quarantined receipt {path} the recovery run names"
            )));
        }
        (Some(_), []) => return Err(refused(format!("member {QUARANTINE} is missing"))),
        (_, [member, ..]) => return Err(refused(format!("extra member {}", member.name))),
    }
    Ok(Verified {
        index,
        manifest,
        state,
        position,
        ledger,
        recovery_of,
        root,
        heads,
        signed,
    })
}

/// The output of a verified bundle: the `status --run-id` summary plus
/// what was verified.
///
/// With keys (trust-model §2 promise 6, contracts/bundle.md "Signed
/// verdicts"), the summary is the signed prefix's — the state replayed up
/// to `signed_through`, the largest size a signed head covers — and the
/// events after it are judged apart in `unsigned_tail` (`signed: false`):
/// a dropped head or unsigned events never make the verdict say more than
/// the signatures do.
pub fn verified_output(verified: &Verified, at: &str) -> BundleVerified {
    let run_id = &verified.index.run_id;
    let (state, ledger, position) = match &verified.signed {
        Some((state, ledger, position)) => (state, ledger, position),
        None => (&verified.state, &verified.ledger, &verified.position),
    };
    let mut status =
        super::views::replayed_status(&verified.manifest, state, position, ledger, run_id, at);
    status.recovery_of = verified.recovery_of.clone();
    let signed = verified.signed.as_ref().map(|(_, _, signed)| {
        let through = signed.sequence;
        let total = verified.position.sequence;
        let unsigned_tail = (total > through).then(|| {
            let full = super::views::phase2_status(
                &verified.manifest,
                &verified.state,
                &verified.ledger,
                run_id,
                at,
            );
            UnsignedTail {
                span: super::UnsignedSpan::after(through, total),
                checksum: verified.position.checksum.clone(),
                run_state: verified.state.run_state().to_string(),
                lanes: full.detail.lanes,
                completion: full.detail.completion,
                breaches: verified
                    .state
                    .breaches()
                    .iter()
                    .filter(|b| b.sequence > through)
                    .cloned()
                    .collect(),
            }
        });
        SignedReach {
            signed_through: through,
            receipt_sequence: total,
            unsigned_tail,
        }
    });
    BundleVerified {
        status,
        signed,
        heads: verified.heads.len(),
        root_hash: hash_to_base64(&verified.root),
        verified: true,
        publication: None,
    }
}

/// What `bundle-verify` answers: the run as `status --run-id` shows it
/// (the signed prefix's, with keys) and what was verified.
#[derive(Debug, Serialize)]
pub struct BundleVerified {
    #[serde(flatten)]
    pub status: super::views::RunStatus,
    #[serde(flatten)]
    pub signed: Option<SignedReach>,
    /// How many signed heads held.
    pub heads: usize,
    /// The Merkle root of the receipt (base64).
    pub root_hash: String,
    /// Always true: a bundle that does not verify is a refusal.
    pub verified: bool,
    /// For `--git`: the publications verified.
    #[serde(flatten)]
    pub publication: Option<Publications>,
}

/// With keys (trust-model §2 promise 6): how far the signatures reach.
#[derive(Debug, Serialize)]
pub struct SignedReach {
    /// The largest size a signed head covers; the summary is its state.
    pub signed_through: u64,
    /// The receipt's whole length.
    pub receipt_sequence: u64,
    /// The events after `signed_through` (null when there are none).
    pub unsigned_tail: Option<UnsignedTail>,
}

/// The events after the signed prefix, judged apart.
#[derive(Debug, Serialize)]
pub struct UnsignedTail {
    #[serde(flatten)]
    pub span: super::UnsignedSpan,
    /// The checksum of the receipt's last event.
    pub checksum: String,
    /// The whole receipt's state, lanes and completion.
    pub run_state: String,
    pub lanes: Vec<crate::coordinator::views::LaneView>,
    pub completion: crate::coordinator::completion::CompletionReport,
    /// The breaches among these events.
    pub breaches: Vec<crate::coordinator::breach::Breach>,
}

/// What `bundle-verify --git` adds: the publication history verified.
#[derive(Debug, Serialize)]
pub struct Publications {
    /// How many publications (commits) the ref holds.
    pub publications: usize,
    #[serde(rename = "ref")]
    pub reference: String,
    /// The newest publication's commit.
    pub commit: String,
}

/// Open verifier keys and an external head for a verification.
pub fn load_checks(
    root: &StateRoot,
    keys: &[PathBuf],
    head: Option<&Path>,
) -> FlowResult<(Option<VerifierKeys>, Option<Vec<u8>>)> {
    let keys = if keys.is_empty() {
        None
    } else {
        Some(super::transparency::load_verifier_keys(root, keys)?)
    };
    let head = head
        .map(|path| {
            read_small(&root.at(path), None).map_err(|e| FlowError::from(e.refused("head file")))
        })
        .transpose()?;
    Ok((keys, head))
}

/// `bundle-verify FILE`: stream the tar, check everything, print the
/// run's summary. Reads nothing of any state root, writes nothing.
pub fn verify_file(
    root: &StateRoot,
    file: &Path,
    keys: &[PathBuf],
    head: Option<&Path>,
    at: &str,
) -> FlowResult<BundleVerified> {
    super::views::check_at(at)?;
    let (keys, head) = load_checks(root, keys, head)?;
    let input = open_input(root.at(file), "bundle").map_err(|e| {
        ErrorKind::Contract(format!(
            "bundle file refused: {}",
            FlowError::from(e).message()
        ))
    })?;
    let total = input.metadata().map_or(0, |m| m.len());
    let input = crate::store::progress::Tracked::new(input, total);
    let mut reader = TarReader::new(std::io::BufReader::with_capacity(1 << 16, input));
    let size = reader.begin_index().map_err(bundle_error)?;
    let mut index_bytes = vec![0u8; size as usize];
    let mut filled = 0;
    while filled < index_bytes.len() {
        let n = reader
            .read_data(&mut index_bytes[filled..])
            .map_err(bundle_error)?;
        filled += n;
    }
    reader.end(INDEX).map_err(bundle_error)?;
    let index = Index::parse(&index_bytes).map_err(bundle_error)?;
    let verified = verify_members(index, &mut reader, keys.as_ref(), head.as_deref())?;
    reader.finish().map_err(bundle_error)?;
    Ok(verified_output(&verified, at))
}
