//! The run's receipt as a transparency log (contracts/transparency.md): the
//! stored Merkle tree kept beside every append, signed heads (C2SP
//! checkpoints), inclusion and consistency proofs, and their offline check.
//!
//! The tree is derived data: it is used only while its length and last
//! leaf match the verified receipt, else it is rebuilt from the receipt
//! (under the lock) or computed in memory (read-only commands). A signer
//! never signs a receipt it has not verified: the proven checkpoint (the
//! receipt exactly as our last append left it) or a full verification.

use crate::coordinator::decide::{InputRefusal, InputRule};
use crate::store::root::StateRoot;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};

use super::error::{ErrorKind, FlowError, FlowResult};
use super::ledger::{OpenRun, open_run, verify_chain};
use crate::receipt::merkle::{
    Hash, HashReader, MemoryHashes, RootAccumulator, check_consistency, check_inclusion,
    consistency_proof, hash_from_base64, hash_to_base64, inclusion_proof, leaf_hash,
    stored_hash_index, tree_root,
};
use crate::receipt::signed_head::{
    HeadBody, HeadError, InclusionProof, OpenedHead, SignerKey, VerifierKeys, generate_key,
    open_head, parse_head,
};
use crate::receipt::verify::ChainPosition;
use crate::store::heads::{StoredHead, create_new_file, read_signer_key, read_small};
use crate::store::run::RunDir;
use crate::store::tree::StoredTree;

/// Where the hashes of a tree come from.
#[derive(Debug)]
pub enum TreeView {
    /// The run's `tree-hashes` file, proven against the receipt.
    Stored(StoredTree),
    /// Built from the receipt in memory (the file did not match and the
    /// caller may not write).
    Memory(MemoryHashes),
}

impl HashReader for TreeView {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, tlog_tiles::tlog::Error> {
        match self {
            TreeView::Stored(tree) => tree.read_hashes(indexes),
            TreeView::Memory(tree) => tree.read_hashes(indexes),
        }
    }
}

impl TreeView {
    fn leaf(&self, index: u64) -> FlowResult<Hash> {
        self.read_hashes(&[stored_hash_index(0, index)])
            .ok()
            .and_then(|h| h.first().copied())
            .ok_or_else(|| ErrorKind::ReceiptCorrupt(format!("tree has no leaf {index}")).into())
    }

    fn root(&self, size: u64) -> FlowResult<Hash> {
        tree_root(size, self).map_err(|e| ErrorKind::ReceiptCorrupt(e.to_string()).into())
    }
}

fn head_error(e: HeadError) -> FlowError {
    match e {
        HeadError::Key(m) => ErrorKind::Contract(m).into(),
        HeadError::Invalid(m) => ErrorKind::ReceiptCorrupt(m).into(),
    }
}

/// The leaf hash of the last line at `position` (None before the first).
fn last_leaf(dir: &RunDir, byte_length: u64, last_line_length: u64) -> Option<Option<Hash>> {
    if byte_length == 0 {
        return Some(None);
    }
    let line = dir.read_receipt_range(byte_length, last_line_length)?;
    let body = line.strip_suffix(b"\n")?;
    Some(Some(leaf_hash(body)))
}

/// Build the tree over the receipt's first `byte_length` bytes.
fn build_tree(dir: &RunDir, byte_length: u64) -> FlowResult<MemoryHashes> {
    let mut tree = MemoryHashes::default();
    let mut failed = None;
    dir.for_each_line(byte_length, |line| {
        if failed.is_none()
            && let Err(e) = tree.push_line(line)
        {
            failed = Some(e);
        }
    })?;
    match failed {
        Some(e) => Err(ErrorKind::ReceiptCorrupt(e.to_string()).into()),
        None => Ok(tree),
    }
}

/// The tree over the verified receipt at `position`: the stored
/// `tree-hashes` when it ends in the receipt's last leaf, else built in
/// memory (read-only: nothing is written). For answers a verifier checks
/// on its own (an inclusion proof), not for verdicts.
pub fn tree_at(run: &OpenRun, position: &ChainPosition) -> FlowResult<TreeView> {
    let file = run.dir.tree_file();
    if let Some(last) = last_leaf(&run.dir, position.byte_length, position.last_line_length)
        && let Some(tree) = file.open(position.sequence, last, false)
    {
        return Ok(TreeView::Stored(tree));
    }
    receipt_tree(run, position)
}

/// Rewrite the stored tree from `built` (the receipt's own tree at
/// `position`) when it does not end in the receipt's last leaf: missing,
/// short, or another writer's lines after it. Best effort, as after an
/// append.
fn keep_stored_tree(run: &OpenRun, position: &ChainPosition, built: &MemoryHashes) {
    let file = run.dir.tree_file();
    let current = last_leaf(&run.dir, position.byte_length, position.last_line_length)
        .and_then(|last| file.open(position.sequence, last, false))
        .is_some();
    if !current {
        let _ = file.rewrite(&built.hashes);
    }
}

/// The tree over the verified receipt at `position`, built from the
/// receipt's own lines: for verdicts an auditor reads (`attest`), which
/// never rest on the stored `tree-hashes` (a derived file: its inner
/// hashes are not proven by its last leaf; contracts/receipt.md
/// "Checkpoint").
pub fn receipt_tree(run: &OpenRun, position: &ChainPosition) -> FlowResult<TreeView> {
    let built = build_tree(&run.dir, position.byte_length)?;
    if built.leaves != position.sequence {
        return Err(ErrorKind::ReceiptCorrupt(
            "receipt lines do not match its verified length".into(),
        )
        .into());
    }
    Ok(TreeView::Memory(built))
}

/// After an append's fsync, under the lock: add the new line's leaf to the
/// stored tree, or rebuild the tree when it did not match the receipt
/// before the append. Best effort: the receipt is already durable, and a
/// tree that is not current is rebuilt on its next use.
pub fn extend_tree(dir: &RunDir, before: (u64, u64, u64), line: &[u8]) {
    let (leaves, byte_length, last_line_length) = before;
    let file = dir.tree_file();
    let Some(new_leaf) = line.strip_suffix(b"\n").map(leaf_hash) else {
        return;
    };
    if let Some(last) = last_leaf(dir, byte_length, last_line_length)
        && let Some(mut tree) = file.open(leaves, last, true)
        && tree.append_leaf(new_leaf, file.path()).is_ok()
    {
        return;
    }
    if let Ok(built) = build_tree(dir, byte_length + line.len() as u64)
        && built.leaves == leaves + 1
    {
        let _ = file.rewrite(&built.hashes);
    }
}

/// The verified head of a run: the proven checkpoint when the receipt is
/// exactly as our last append left it, else a full verification.
fn verified_position(run: &OpenRun, holding_lock: bool) -> FlowResult<ChainPosition> {
    if run.require_phase2().is_ok()
        && let Some((_, position)) = super::checkpoint::proven_state(run)
    {
        return Ok(position);
    }
    verify_chain(run)?.intact(run, holding_lock)
}

fn event_field(line: &[u8], key: &str) -> Option<Value> {
    serde_json::from_slice::<Value>(line)
        .ok()?
        .get(key)
        .cloned()
}

fn sequence_of(line: &[u8]) -> Option<u64> {
    // Cheap: the canonical line has the key once; parse the whole line to
    // be exact.
    event_field(line, "sequence")?.as_u64()
}

/// Does `body` describe this run's receipt? `root_at(size)` and
/// `checksum_at(size)` answer for the receipt's first `size` lines.
fn head_mismatch(
    run: &OpenRun,
    body: &HeadBody,
    length: u64,
    root_at: &mut dyn FnMut(u64) -> FlowResult<Hash>,
    checksum_at: &mut dyn FnMut(u64) -> FlowResult<Option<String>>,
) -> FlowResult<Option<String>> {
    if body.run_id != run.dir.run_id {
        return Ok(Some(format!("it is a head of run {}", body.run_id)));
    }
    if body.manifest_hash != run.manifest.contract.hash {
        return Ok(Some("its manifest hash is not the run's".into()));
    }
    if body.size > length {
        return Ok(Some(format!(
            "it is for {} events and the receipt has {length}: the receipt no longer extends it",
            body.size
        )));
    }
    if root_at(body.size)? != body.root {
        return Ok(Some(format!(
            "the tree over the first {} events has another root: the receipt no longer extends it",
            body.size
        )));
    }
    if let Some(checksum) = checksum_at(body.size)?
        && checksum != body.chain_checksum
    {
        return Ok(Some(format!(
            "event {} has another checksum: the receipt no longer extends it",
            body.size
        )));
    }
    Ok(None)
}

fn damaged_head(name: &str, why: &str) -> FlowError {
    ErrorKind::ReceiptCorrupt(format!("signed head {name} does not hold: {why}")).into()
}

/// Load and check a signer key file (exit 2 before anything is signed).
pub fn load_signer_key(root: &StateRoot, path: &Path) -> FlowResult<SignerKey> {
    let bytes = read_signer_key(root.at(path))?;
    SignerKey::parse(&bytes).map_err(head_error)
}

/// Load verifier key files (one key per line each).
pub fn load_verifier_keys(root: &StateRoot, paths: &[PathBuf]) -> FlowResult<VerifierKeys> {
    let mut keys = VerifierKeys::default();
    for path in paths {
        let bytes = read_small(&root.at(path), None).map_err(|e| e.refused("verifier key file"))?;
        keys.extend(VerifierKeys::parse(&bytes).map_err(head_error)?);
    }
    Ok(keys)
}

/// What `key-generate` answers: the verifier key to hand out and where its
/// signer key was written.
#[derive(Debug, Serialize)]
pub struct KeyGenerated {
    /// The key's hash (the part after `+` in the verifier key).
    pub key_hash: String,
    pub key_name: String,
    /// The signer key file written.
    pub path: String,
    /// `name+hash+key`, as `--key` files hold it.
    pub verifier_key: String,
}

/// `key-generate`: a new Ed25519 key pair; the signer key goes to `out`
/// (0600, never over a file or through a symlink), the verifier key is
/// printed.
pub fn key_generate(root: &StateRoot, name: &str, out: &Path) -> FlowResult<KeyGenerated> {
    use rand_core::RngCore;
    let mut seed = [0u8; 32];
    rand_core::OsRng
        .try_fill_bytes(&mut seed)
        .map_err(|e| ErrorKind::Contract(format!("no random source: {e}")))?;
    let (skey, vkey) = generate_key(seed, name).map_err(head_error)?;
    let mut bytes = skey.into_bytes();
    bytes.push(b'\n');
    create_new_file(root.at(out), &bytes, "signer key file")?;
    let key_hash = vkey.split('+').nth(1).unwrap_or_default().to_string();
    Ok(KeyGenerated {
        key_hash,
        key_name: name.to_string(),
        path: out.to_string_lossy().into_owned(),
        verifier_key: vkey,
    })
}

/// What `sign-head` answers (and a gate's `signed_head`): the head signed
/// and where it is stored.
#[derive(Debug, Serialize)]
pub struct SignedHead {
    /// The checksum of the event at `size`.
    pub chain_checksum: String,
    /// The signed note, as stored.
    pub note: String,
    /// The stored head, relative to the state root.
    pub path: String,
    /// The Merkle root of the first `size` events (base64).
    pub root_hash: String,
    pub run_id: String,
    pub size: u64,
}

/// `sign-head`: verify, check the stored heads, sign the head at the
/// receipt's length and store it (under the run lock; no owner needed).
pub fn sign_head(root: &StateRoot, run_id: &str, key: &SignerKey) -> FlowResult<SignedHead> {
    let run = open_run(root, run_id)?;
    run.dir.validate()?;
    let _guard = run.dir.receipt_lock().acquire()?;
    let position = verified_position(&run, true)?;
    if position.sequence == 0 {
        return Err(ErrorKind::ReceiptCorrupt("receipt has no events to sign".into()).into());
    }
    // A signature is a verdict an auditor reads (trust-model promise 1):
    // the root signed is that of the receipt's own lines, never the stored
    // `tree-hashes`, whose earlier hashes its last leaf does not prove. The
    // stored tree is brought up to date as any writer does.
    let tree = receipt_tree(&run, &position)?;
    if let TreeView::Memory(built) = &tree {
        keep_stored_tree(&run, &position, built);
    }
    // A head we stored that the receipt no longer extends is damage: never
    // sign over it.
    for head in run.dir.stored_heads()? {
        let name = head.relative(&run.dir);
        let bytes = read_small(&root.at(&head.path), None)
            .map_err(|e| damaged_head(&name, &e.to_string()))?;
        let opened = parse_head(&bytes).map_err(|e| damaged_head(&name, e.message()))?;
        if let Some(why) = head_mismatch(
            &run,
            &opened.body,
            position.sequence,
            &mut |size| tree.root(size),
            &mut |_| Ok(None),
        )? {
            return Err(damaged_head(&name, &why));
        }
    }
    let body = HeadBody {
        run_id: run_id.to_string(),
        size: position.sequence,
        root: tree.root(position.sequence)?,
        chain_checksum: position.checksum.clone(),
        manifest_hash: run.manifest.contract.hash.clone(),
    };
    let note = key.sign(&body).map_err(head_error)?;
    let stored = run.dir.store_head(body.size, &key.key_hash(), &note)?;
    Ok(SignedHead {
        chain_checksum: body.chain_checksum,
        note: String::from_utf8_lossy(&note).into_owned(),
        path: stored.relative(&run.dir),
        root_hash: hash_to_base64(&body.root),
        run_id: run_id.to_string(),
        size: body.size,
    })
}

/// What `verify` adds after checking the signed heads.
#[derive(Debug, Serialize)]
pub struct HeadsChecked {
    /// How many stored heads were checked.
    pub heads_checked: usize,
    /// The largest size a checked head names (0 without heads).
    pub heads_newest_size: u64,
    /// Whether every head's signatures were verified with `--key`.
    pub heads_signatures_verified: bool,
    /// The `--head` file, when one was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head: Option<ExternalHead>,
}

/// The head of a `--head` file, as checked against the receipt.
#[derive(Debug, Serialize)]
pub struct ExternalHead {
    pub root_hash: String,
    pub size: u64,
    /// The key names whose signatures verified.
    pub verified_by: Vec<String>,
}

/// What `verify` adds when the run has stored heads or `--head`/`--key`
/// were given: every head's size and root (and chain head) against the
/// receipt, and signatures with keys.
pub fn verify_heads(
    run: &OpenRun,
    position: &ChainPosition,
    keys: Option<&VerifierKeys>,
    external: Option<&[u8]>,
) -> FlowResult<Option<HeadsChecked>> {
    let root = &run.dir.root;
    let stored = run.dir.stored_heads()?;
    if stored.is_empty() && keys.is_none() && external.is_none() {
        return Ok(None);
    }
    let open = |bytes: &[u8]| match keys {
        Some(keys) => open_head(bytes, keys),
        None => parse_head(bytes),
    };
    let mut heads: Vec<(String, OpenedHead)> = Vec::new();
    for head in &stored {
        let name = head.relative(&run.dir);
        let bytes = read_small(&root.at(&head.path), None)
            .map_err(|e| damaged_head(&name, &e.to_string()))?;
        let opened = open(&bytes).map_err(|e| damaged_head(&name, e.message()))?;
        heads.push((name, opened));
    }
    if let Some(bytes) = external {
        let opened = open(bytes).map_err(|e| damaged_head("--head", e.message()))?;
        heads.push(("--head".to_string(), opened));
    }
    // One pass over the receipt: the root and the checksum at every size a
    // head names (within the verified length).
    let mut wanted: BTreeMap<u64, Option<(Hash, String)>> = heads
        .iter()
        .map(|(_, h)| h.body.size)
        .filter(|size| *size <= position.sequence)
        .map(|size| (size, None))
        .collect();
    if let Some(&largest) = wanted.keys().next_back() {
        let mut acc = RootAccumulator::default();
        let mut done = false;
        run.dir.for_each_line(position.byte_length, |line| {
            if done {
                return;
            }
            acc.push_line(line);
            if let Some(slot) = wanted.get_mut(&acc.leaves()) {
                let checksum = event_field(line, "checksum")
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                *slot = Some((acc.root(), checksum));
            }
            done = acc.leaves() >= largest;
        })?;
    }
    let answer = |size: u64| wanted.get(&size).cloned().flatten();
    let mut newest = 0u64;
    for (name, head) in &heads {
        if let Some(why) = head_mismatch(
            run,
            &head.body,
            position.sequence,
            &mut |size| {
                answer(size).map(|a| a.0).ok_or_else(|| {
                    ErrorKind::ReceiptCorrupt("receipt changed while read".into()).into()
                })
            },
            &mut |size| Ok(answer(size).map(|a| a.1)),
        )? {
            return Err(damaged_head(name, &why));
        }
        newest = newest.max(head.body.size);
    }
    let head = external.and(heads.last()).map(|(_, head)| ExternalHead {
        root_hash: hash_to_base64(&head.body.root),
        size: head.body.size,
        verified_by: head.verified_by.clone(),
    });
    Ok(Some(HeadsChecked {
        heads_checked: stored.len(),
        heads_newest_size: newest,
        heads_signatures_verified: keys.is_some(),
        head,
    }))
}

/// The head a proof is made against: `--head FILE`, or the newest stored
/// head. It must describe this receipt.
fn chosen_head(
    run: &OpenRun,
    file: Option<&Path>,
    position: &ChainPosition,
    tree: &TreeView,
) -> FlowResult<(Vec<u8>, HeadBody)> {
    let root = &run.dir.root;
    let (name, bytes) = match file {
        Some(path) => (
            path.to_string_lossy().into_owned(),
            read_small(&root.at(path), None).map_err(|e| e.refused("head file"))?,
        ),
        None => {
            let heads = run.dir.stored_heads()?;
            let newest: Option<&StoredHead> = heads.last();
            let Some(head) = newest else {
                return Err(InputRule::NoSignedHead.into());
            };
            let name = head.relative(&run.dir);
            let bytes = read_small(&root.at(&head.path), None)
                .map_err(|e| damaged_head(&name, &e.to_string()))?;
            (name, bytes)
        }
    };
    let body = parse_head(&bytes)
        .map_err(|e| damaged_head(&name, e.message()))?
        .body;
    let mut checksum_at = |size: u64| -> FlowResult<Option<String>> {
        Ok(if size == position.sequence {
            Some(position.checksum.clone())
        } else {
            None
        })
    };
    if let Some(why) = head_mismatch(
        run,
        &body,
        position.sequence,
        &mut |size| tree.root(size),
        &mut checksum_at,
    )? {
        return Err(damaged_head(&name, &why));
    }
    Ok((bytes, body))
}

/// Read-only: the verified position and tree of a run for a proof.
fn proof_basis(run: &OpenRun) -> FlowResult<(ChainPosition, TreeView)> {
    let position = verified_position(run, false)?;
    let tree = tree_at(run, &position)?;
    Ok((position, tree))
}

/// What `prove-event` answers: the event line and its inclusion proof.
#[derive(Debug, Serialize)]
pub struct EventProof {
    /// The event's receipt line.
    pub event: String,
    /// The proof's text (also written to `--out`).
    pub proof: String,
    pub run_id: String,
    pub sequence: u64,
    /// The size of the head the proof is made against.
    pub size: u64,
}

/// `prove-event`: the inclusion proof of event `sequence` in a signed head.
pub fn prove_event(
    root: &StateRoot,
    run_id: &str,
    sequence: u64,
    head: Option<&Path>,
    out: Option<&Path>,
) -> FlowResult<EventProof> {
    let run = open_run(root, run_id)?;
    let (position, tree) = proof_basis(&run)?;
    let (note, body) = chosen_head(&run, head, &position, &tree)?;
    if sequence == 0 || sequence > body.size {
        return Err(FlowError::from(InputRefusal::ProofSequence {
            size: body.size,
        }));
    }
    let line = run
        .dir
        .find_line(sequence, position.byte_length, sequence_of)?
        .ok_or_else(|| ErrorKind::ReceiptCorrupt(format!("receipt has no event {sequence}")))?;
    if leaf_hash(&line) != tree.leaf(sequence - 1)? {
        return Err(ErrorKind::ReceiptCorrupt(format!(
            "event {sequence} is not the tree's leaf {}",
            sequence - 1
        ))
        .into());
    }
    let hashes = inclusion_proof(body.size, sequence - 1, &tree)
        .map_err(|e| ErrorKind::ReceiptCorrupt(e.to_string()))?;
    let proof = InclusionProof {
        index: sequence - 1,
        hashes,
        head: note,
    }
    .to_text();
    if let Some(out) = out {
        create_new_file(root.at(out), &proof, "proof file")?;
    }
    Ok(EventProof {
        event: String::from_utf8_lossy(&line).into_owned(),
        proof: String::from_utf8_lossy(&proof).into_owned(),
        run_id: run_id.to_string(),
        sequence,
        size: body.size,
    })
}

/// A consistency proof, as `prove-append` prints and writes it (and
/// `check-proof --append` reads it).
#[derive(Debug, Serialize)]
pub struct AppendProof {
    /// The proof's hashes (base64).
    pub hashes: Vec<String>,
    pub new_note: String,
    pub new_size: u64,
    pub old_note: String,
    pub old_size: u64,
}

/// What `prove-append` answers.
#[derive(Debug, Serialize)]
pub struct AppendProved {
    pub proof: AppendProof,
    pub run_id: String,
}

/// `prove-append`: the consistency proof that a newer head extends an
/// older one; the proof carries both signed heads.
pub fn prove_append(
    root: &StateRoot,
    run_id: &str,
    from: &Path,
    head: Option<&Path>,
    out: Option<&Path>,
) -> FlowResult<AppendProved> {
    let run = open_run(root, run_id)?;
    let (position, tree) = proof_basis(&run)?;
    let (old_note, old) = chosen_head(&run, Some(from), &position, &tree)?;
    let (new_note, new) = chosen_head(&run, head, &position, &tree)?;
    if old.size > new.size {
        return Err(FlowError::from(InputRefusal::ProofFromNewer {
            old: old.size,
            new: new.size,
        }));
    }
    let hashes = consistency_proof(new.size, old.size, &tree)
        .map_err(|e| ErrorKind::ReceiptCorrupt(e.to_string()))?;
    let proof = AppendProof {
        hashes: hashes.iter().map(hash_to_base64).collect(),
        new_note: String::from_utf8_lossy(&new_note).into_owned(),
        new_size: new.size,
        old_note: String::from_utf8_lossy(&old_note).into_owned(),
        old_size: old.size,
    };
    if let Some(out) = out {
        let mut bytes = crate::receipt::canonical::to_vec(&json!(proof));
        bytes.push(b'\n');
        create_new_file(root.at(out), &bytes, "proof file")?;
    }
    Ok(AppendProved {
        proof,
        run_id: run_id.to_string(),
    })
}

/// What `check-proof` is given.
pub enum ProofInput<'a> {
    Inclusion { proof: &'a Path, event: &'a Path },
    Append(&'a Path),
}

fn proof_failed(m: impl Into<String>) -> FlowError {
    ErrorKind::ProofInvalid(format!("proof does not verify: {}", m.into())).into()
}

fn check_origin(body: &HeadBody, run_id: Option<&str>) -> FlowResult<()> {
    match run_id {
        Some(id) if id != body.run_id => Err(proof_failed(format!(
            "the head's origin is {}, not bluetape-flow/{id}",
            body.origin()
        ))),
        _ => Ok(()),
    }
}

/// What `check-proof` answers: the proof verified, and what it proves.
#[derive(Debug, Serialize)]
pub struct ProofChecked {
    /// The run whose heads the proof carries.
    pub run_id: String,
    #[serde(flatten)]
    pub proves: Proves,
    /// Always true: a proof that does not verify is a refusal.
    pub verified: bool,
}

/// What a verified proof proves.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Proves {
    /// The event at `sequence` is in the head of `size` events, signed by
    /// `verified_by`.
    Inclusion {
        sequence: u64,
        size: u64,
        verified_by: Vec<String>,
    },
    /// The head of `new_size` events extends the head of `old_size`.
    Append { new_size: u64, old_size: u64 },
}

/// `check-proof`: verify a proof offline, with no state root.
pub fn check_proof(
    root: &StateRoot,
    input: ProofInput<'_>,
    keys: &VerifierKeys,
    run_id: Option<&str>,
) -> FlowResult<ProofChecked> {
    if keys.is_empty() {
        return Err(InputRule::CheckProofNeedsKey.into());
    }
    let read = |path: &Path, what: &str| {
        read_small(&root.at(path), None).map_err(|e| FlowError::from(e.refused(what)))
    };
    let (run_id, proves) = match input {
        ProofInput::Inclusion { proof, event } => {
            let proof = InclusionProof::parse(&read(proof, "proof file")?)
                .map_err(|e| proof_failed(e.message()))?;
            let event = read(event, "event file")?;
            let line = event.strip_suffix(b"\n").unwrap_or(&event);
            let head = open_head(&proof.head, keys).map_err(|e| proof_failed(e.message()))?;
            check_origin(&head.body, run_id)?;
            let event_run = event_field(line, "run_id");
            let event_sequence = event_field(line, "sequence").and_then(|v| v.as_u64());
            if event_run.as_ref().and_then(Value::as_str) != Some(head.body.run_id.as_str()) {
                return Err(proof_failed("the event is not of the head's run"));
            }
            if event_sequence != proof.index.checked_add(1) {
                return Err(proof_failed(format!(
                    "the event's sequence is not index {} + 1",
                    proof.index
                )));
            }
            check_inclusion(
                &proof.hashes,
                head.body.size,
                head.body.root,
                proof.index,
                leaf_hash(line),
            )
            .map_err(|e| proof_failed(e.to_string()))?;
            if proof.index + 1 == head.body.size
                && event_field(line, "checksum").and_then(|v| v.as_str().map(str::to_string))
                    != Some(head.body.chain_checksum.clone())
            {
                return Err(proof_failed("the head's chain line names another event"));
            }
            (
                head.body.run_id,
                Proves::Inclusion {
                    sequence: proof.index + 1,
                    size: head.body.size,
                    verified_by: head.verified_by,
                },
            )
        }
        ProofInput::Append(path) => {
            let bytes = read(path, "proof file")?;
            let value: Value =
                serde_json::from_slice(&bytes).map_err(|_| proof_failed("not a JSON object"))?;
            let text = |k: &str| {
                value
                    .get(k)
                    .and_then(Value::as_str)
                    .ok_or_else(|| proof_failed(format!("no `{k}` text")))
            };
            let number = |k: &str| {
                value
                    .get(k)
                    .and_then(Value::as_u64)
                    .ok_or_else(|| proof_failed(format!("no `{k}` number")))
            };
            let hashes = value
                .get("hashes")
                .and_then(Value::as_array)
                .ok_or_else(|| proof_failed("no `hashes` list"))?
                .iter()
                .map(|h| h.as_str().and_then(hash_from_base64))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| proof_failed("a hash is not a base64 SHA-256"))?;
            let old = open_head(text("old_note")?.as_bytes(), keys)
                .map_err(|e| proof_failed(format!("old head: {}", e.message())))?;
            let new = open_head(text("new_note")?.as_bytes(), keys)
                .map_err(|e| proof_failed(format!("new head: {}", e.message())))?;
            check_origin(&new.body, run_id)?;
            if old.body.run_id != new.body.run_id {
                return Err(proof_failed("the two heads have different origins"));
            }
            if number("old_size")? != old.body.size || number("new_size")? != new.body.size {
                return Err(proof_failed("the sizes are not the heads' sizes"));
            }
            check_consistency(
                &hashes,
                new.body.size,
                new.body.root,
                old.body.size,
                old.body.root,
            )
            .map_err(|e| proof_failed(e.to_string()))?;
            if old.body.size == new.body.size && old.body.chain_checksum != new.body.chain_checksum
            {
                return Err(proof_failed("two heads of one size name different events"));
            }
            (
                new.body.run_id,
                Proves::Append {
                    new_size: new.body.size,
                    old_size: old.body.size,
                },
            )
        }
    };
    Ok(ProofChecked {
        run_id,
        proves,
        verified: true,
    })
}

/// The head a gate leaves, signed after its success: the envelope's
/// `signed_head`. The gate's event is durable, so a signing failure is
/// reported beside the success, never as the command's failure.
pub fn sign_after_gate(root: &StateRoot, run_id: &str, key: &SignerKey) -> (String, Value) {
    match sign_head(root, run_id, key) {
        Ok(head) => ("signed_head".into(), json!(head)),
        Err(e) => ("signed_head_error".into(), json!(e.message())),
    }
}
