//! Streaming receipt verification (reference-runtime §3.1, §4.3.1). Memory is
//! bounded by one line: each line is framed, parsed, contract-checked and
//! chained, then handed to the caller and dropped.

use crate::receipt::vocab::EventType;
use bumpalo::Bump;
use serde_json::{Map, Value};
use std::io::{BufRead, ErrorKind};

use super::canonical;
use super::canonical_parse::{self, Scratch};
use super::json_ref::{JsonRef, ObjectRef};
use super::manifest::RunManifest;
use super::primitives::Sha256Hex;
use super::rules::{EventContract, Family, check_event_ref};

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
    /// The first verified line whose bytes are not canonical (written by
    /// another tool), if any: our head never moves over it (DEVIATIONS 105).
    first_non_canonical: Option<u64>,
}

impl<'a> ChainVerifier<'a> {
    pub fn new(manifest: &'a RunManifest, run_id: &'a str, position: ChainPosition) -> Self {
        ChainVerifier {
            manifest,
            run_id,
            position,
            canonical_until: 0,
            first_non_canonical: None,
        }
    }

    /// The first line verified so far whose bytes are not canonical.
    pub fn first_non_canonical(&self) -> Option<u64> {
        self.first_non_canonical
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
        mut accept: impl FnMut(&ObjectRef<'_>, &ChainPosition) -> Result<(), String>,
    ) -> Result<Result<(), StreamStop>, std::io::Error> {
        let cap = self.line_cap();
        let rules = LineRules::new(self.manifest, self.run_id, true);
        let empty = ObjectRef::default();
        let mut line = Vec::new();
        let mut arena = Bump::new();
        loop {
            line.clear();
            arena.reset();
            if read_line(reader, cap, &mut line)? == 0 {
                return Ok(Ok(()));
            }
            let facts = rules.examine(&line, &arena);
            if let Err(damage) = self.advance(&facts) {
                return Ok(Err(StreamStop::Damage(damage)));
            }
            if let Err(reason) = accept(facts.event().unwrap_or(&empty), &self.position) {
                return Ok(Err(StreamStop::Rejected(reason)));
            }
        }
    }

    /// [`Self::verify_stream`] on more threads: a reader cuts the receipt
    /// into batches of whole lines, [`WORKERS`] workers examine them in
    /// turn (parsing, contract, canonical form and checksum: the costly,
    /// chain-independent part), and this thread links them in order. At most
    /// a few batches are in flight, so memory stays bounded.
    ///
    /// The events themselves are not handed on (plain verification), so
    /// `accept` sees only the position after each line.
    pub fn verify_stream_parallel<R: BufRead + Send>(
        &mut self,
        reader: &mut R,
        mut accept: impl FnMut(&ChainPosition) -> Result<(), String>,
    ) -> Result<Result<(), StreamStop>, std::io::Error> {
        self.parallel(reader, false, |_, position| accept(position))
    }

    /// [`Self::verify_stream_parallel`] that also hands each verified event
    /// on, in order (read on the worker threads, borrowing the batch's
    /// bytes): for a caller that replays while it verifies. The batch is
    /// lent: it goes back to the thread that read it to be freed there (a
    /// free into another thread's malloc arena takes that arena's lock, and
    /// the workers allocate all the time).
    pub fn verify_stream_parallel_events<R: BufRead + Send>(
        &mut self,
        reader: &mut R,
        mut accept: impl FnMut(&ObjectRef<'_>, &ChainPosition) -> Result<(), String>,
    ) -> Result<Result<(), StreamStop>, std::io::Error> {
        let empty = ObjectRef::default();
        self.parallel(reader, true, |event, position| {
            accept(event.unwrap_or(&empty), position)
        })
    }

    fn parallel<R: BufRead + Send>(
        &mut self,
        reader: &mut R,
        keep_events: bool,
        mut accept: impl FnMut(Option<&ObjectRef<'_>>, &ChainPosition) -> Result<(), String>,
    ) -> Result<Result<(), StreamStop>, std::io::Error> {
        use std::sync::mpsc::{channel, sync_channel};
        // Events handed on hold a few vectors per line besides the batch's
        // bytes: smaller batches keep the ones in flight small.
        let batch_bytes: usize = if keep_events { 24 * 1024 } else { 128 * 1024 };
        let cap = self.line_cap();
        let rules = LineRules::new(self.manifest, self.run_id, keep_events);
        std::thread::scope(|scope| {
            let (outlets, inlets): (Vec<_>, Vec<_>) =
                (0..WORKERS).map(|_| sync_channel::<Lines>(1)).unzip();
            // Buffers of batches the workers are done with, to be filled
            // again (never more than the batches in flight).
            let (recycle, recycled) = channel::<Lines>();
            let reading = scope.spawn(move || -> std::io::Result<()> {
                let mut cutter = LineCutter::new(cap);
                for turn in 0.. {
                    // One buffer per batch, the lines cut by their ends.
                    let mut batch = recycled.try_recv().unwrap_or_default();
                    cutter.fill(reader, &mut batch, batch_bytes)?;
                    if !batch.ends.is_empty() && outlets[turn % outlets.len()].send(batch).is_err()
                    {
                        return Ok(());
                    }
                    if cutter.done() {
                        return Ok(());
                    }
                }
                Ok(())
            });
            let rules = &rules;
            let mut results = Vec::new();
            let mut returns = Vec::new();
            for inlet in inlets {
                let (out, from_worker) = sync_channel::<ExaminedBatch>(1);
                // Examined batches come back here once linked, to be freed
                // on the thread that allocated them. Unbounded, yet never
                // more than the batches in flight: each is drained before
                // the next is handed out.
                let (give_back, back) = channel::<ExaminedBatch>();
                let recycle = recycle.clone();
                scope.spawn(move || {
                    // Arenas of batches given back, emptied for the next;
                    // their line buffers go back to the reader.
                    let mut arenas: Vec<Bump> = Vec::new();
                    for lines in inlet {
                        arenas.extend(back.try_iter().map(|examined| {
                            // The buffer goes back as it is: the reader
                            // reads over it without clearing it first.
                            let Batch { lines, mut arena } = examined.into_owner();
                            let _ = recycle.send(lines);
                            arena.reset();
                            arena
                        }));
                        let batch = Batch {
                            lines,
                            arena: arenas.pop().unwrap_or_default(),
                        };
                        let examined = ExaminedBatch::new(batch, |batch| {
                            let arena = &batch.arena;
                            let mut scratch = Scratch::default();
                            let lines = batch.lines.lines();
                            lines
                                .map(|line| rules.examine_with(line, arena, &mut scratch))
                                .collect()
                        });
                        if out.send(examined).is_err() {
                            return;
                        }
                    }
                    drop(out);
                    back.iter().for_each(drop);
                });
                results.push(from_worker);
                returns.push(give_back);
            }
            let mut outcome = Ok(());
            'batches: for turn in 0.. {
                let Ok(batch) = results[turn % WORKERS].recv() else {
                    break;
                };
                for facts in batch.borrow_dependent() {
                    if let Err(damage) = self.advance(facts) {
                        outcome = Err(StreamStop::Damage(damage));
                        break 'batches;
                    }
                    if let Err(reason) = accept(facts.event(), &self.position) {
                        outcome = Err(StreamStop::Rejected(reason));
                        break 'batches;
                    }
                }
                // A worker that has stopped no longer takes them back.
                if let Err(returned) = returns[turn % WORKERS].send(batch) {
                    drop(returned.0);
                }
            }
            // Stop the pipeline (a stop leaves batches unread).
            drop(results);
            drop(returns);
            match reading.join() {
                Ok(Ok(())) => Ok(outcome),
                Ok(Err(e)) if outcome.is_ok() => Err(e),
                _ => Ok(outcome),
            }
        })
    }

    fn line_cap(&self) -> u64 {
        self.manifest
            .contract
            .limits
            .max_receipt_line_bytes
            .saturating_add(2)
    }

    /// Check one line (with its LF) against the chain so far and advance;
    /// the event as a `Map`.
    pub fn check_line(&mut self, line: &[u8]) -> Result<Map<String, Value>, ReceiptDamage> {
        let arena = Bump::new();
        let facts = LineRules::new(self.manifest, self.run_id, true).examine(line, &arena);
        self.advance(&facts)?;
        Ok(facts.event().map(ObjectRef::to_map).unwrap_or_default())
    }

    /// The chain-dependent checks of an examined line, in the reference's
    /// order, then advance.
    pub fn advance(&mut self, facts: &LineFacts<'_>) -> Result<(), ReceiptDamage> {
        let parsed = facts.body.as_ref().map_err(|reason| self.damage(reason))?;
        let phase2 = self.manifest.contract.family == Family::V1_1;
        let contract_ok = parsed.contract_ok
            && (!phase2 || parsed.claimed_epoch == Some(self.position.owner_epoch));
        if !contract_ok {
            return Err(self.damage("event contract mismatch"));
        }
        let fields = &parsed.fields;
        let expected_sequence = self.position.sequence + 1;
        if fields.sequence != Some(expected_sequence) {
            return Err(self.damage("sequence mismatch"));
        }
        if !fields.run_id_ok {
            return Err(self.damage("run id mismatch"));
        }
        if !fields.manifest_ok {
            return Err(self.damage("manifest hash mismatch"));
        }
        if phase2 && fields.owner_token != self.position.owner_fingerprint.as_deref() {
            return Err(self.damage("owner mismatch"));
        }
        if fields.previous_checksum != Some(self.position.checksum.as_str()) {
            return Err(self.damage("previous checksum mismatch"));
        }
        if parsed.checksum != fields.checksum {
            return Err(self.damage("checksum mismatch"));
        }
        if !parsed.canonical {
            if expected_sequence <= self.canonical_until {
                return Err(
                    self.damage("event bytes differ from their acknowledged canonical form")
                );
            }
            self.first_non_canonical.get_or_insert(expected_sequence);
        }
        self.position.sequence = expected_sequence;
        self.position.checksum.clear();
        self.position.checksum.push_str(fields.checksum);
        self.position.byte_length += facts.len;
        self.position.last_line_length = facts.len;
        if phase2 && let Some(new_owner) = fields.new_owner {
            self.position.owner_fingerprint = new_owner.map(str::to_string);
            self.position.owner_epoch += 1;
        }
        Ok(())
    }
}

/// Threads that read and check batches for [`ChainVerifier::parallel`],
/// each taking every third batch. Three on two cores keep the in-order
/// linking fed better than two: a batch whose worker was descheduled holds
/// the linking up less often (a `verify` of 100,000 events 0.47 s with
/// two, 0.40 s with three, in alternating runs here; four and six were no
/// faster).
const WORKERS: usize = 3;

/// A batch of whole lines in one buffer: `ends[i]` is where line `i`
/// (with its LF) ends. The buffer past the last end is read-ahead or
/// left from an earlier batch (a buffer is filled again as it is).
#[derive(Default)]
pub struct Lines {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

/// Cuts a stream into lines exactly as [`read_line`] does (each piece at
/// most `cap` bytes, up to and including its LF; a longer line is cut
/// after `cap` bytes), reading straight into a batch's buffer: no copy
/// through a `BufReader`'s buffer, and a buffer filled again is not
/// cleared first.
struct LineCutter {
    cap: usize,
    /// The bytes read after the last piece handed out (a line not yet
    /// whole), which begin the next batch.
    carry: Vec<u8>,
    eof: bool,
}

/// Read this much past what a batch still wants, so that it ends with few
/// bytes of an unfinished line to carry over.
const READ_SLACK: usize = 4096;

impl LineCutter {
    fn new(cap: u64) -> LineCutter {
        LineCutter {
            cap: usize::try_from(cap).unwrap_or(usize::MAX).max(1),
            carry: Vec::new(),
            eof: false,
        }
    }

    /// Fill `batch` with whole pieces until they hold at least `want`
    /// bytes or the stream has ended.
    fn fill<R: std::io::Read>(
        &mut self,
        reader: &mut R,
        batch: &mut Lines,
        want: usize,
    ) -> std::io::Result<()> {
        batch.ends.clear();
        let bytes = &mut batch.bytes;
        if bytes.len() < self.carry.len() {
            bytes.resize(self.carry.len(), 0);
        }
        bytes[..self.carry.len()].copy_from_slice(&self.carry);
        let mut len = self.carry.len();
        self.carry.clear();
        // Where the piece being read starts, and how far LFs were looked for.
        let (mut start, mut scan) = (0, 0);
        loop {
            for at in memchr::memchr_iter(b'\n', &bytes[scan..len]) {
                let end = scan + at + 1;
                while end - start > self.cap {
                    start += self.cap;
                    batch.ends.push(start);
                }
                batch.ends.push(end);
                start = end;
            }
            scan = len;
            while len - start >= self.cap {
                start += self.cap;
                batch.ends.push(start);
            }
            if start >= want || self.eof {
                break;
            }
            let room = (want + READ_SLACK).saturating_sub(len).max(READ_SLACK);
            if bytes.len() < len + room {
                bytes.resize(len + room, 0);
            }
            match reader.read(&mut bytes[len..len + room]) {
                Ok(0) => {
                    self.eof = true;
                    if start < len {
                        batch.ends.push(len);
                        start = len;
                    }
                }
                Ok(n) => len += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.carry.extend_from_slice(&bytes[start..len]);
        Ok(())
    }

    /// Whether the stream has ended and every byte of it was handed out.
    fn done(&self) -> bool {
        self.eof && self.carry.is_empty()
    }
}

impl Lines {
    fn lines(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|(start, end)| &self.bytes[start..*end])
    }
}

/// A batch of lines and the arena the events read from them are made in.
struct Batch {
    lines: Lines,
    arena: Bump,
}

/// The facts of each line of a batch, which borrow its bytes and arena.
type BatchFacts<'a> = Vec<LineFacts<'a>>;

self_cell::self_cell!(
    /// A batch of lines and what the rules found in each, read on a worker
    /// thread and handed to the linking thread as one value.
    struct ExaminedBatch {
        owner: Batch,
        #[covariant]
        dependent: BatchFacts,
    }
);

/// One line read with the size cap: at most `cap` bytes, up to and
/// including the LF. Returns the number of bytes read (0 at the end).
fn read_line<R: BufRead>(reader: &mut R, cap: u64, line: &mut Vec<u8>) -> std::io::Result<usize> {
    loop {
        match std::io::Read::take(&mut *reader, cap).read_until(b'\n', line) {
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// What one line says on its own, before its place in the chain is known.
#[derive(Debug)]
pub struct LineFacts<'a> {
    len: u64,
    body: Result<ExaminedEvent<'a>, &'static str>,
}

impl<'a> LineFacts<'a> {
    /// The parsed event, when the line kept it.
    pub fn event(&self) -> Option<&ObjectRef<'a>> {
        self.body
            .as_ref()
            .ok()
            .and_then(|parsed| parsed.event.as_ref())
    }

    /// The event of a line that proves itself: canonical bytes of this
    /// run's event, its contract met, its checksum recomputed. With its
    /// sequence, previous checksum and checksum (for linking it into the
    /// chain). Needs [`LineRules`] that keep events.
    pub fn proven_event(&self) -> Option<(&ObjectRef<'a>, u64, &'a str, &'a str)> {
        let e = self.body.as_ref().ok()?;
        if !(e.canonical && e.contract_ok && e.fields.run_id_ok && e.fields.manifest_ok)
            || e.fields.checksum != e.checksum
        {
            return None;
        }
        Some((
            e.event.as_ref()?,
            e.fields.sequence?,
            e.fields.previous_checksum?,
            e.checksum,
        ))
    }

    /// Whether the line is exactly the canonical event `sequence` of this
    /// run whose checksum is `checksum` (and that checksum is right): the
    /// proof that a checkpoint's head line is still in the receipt.
    pub fn is_canonical_event(&self, sequence: u64, checksum: &str) -> bool {
        self.body.as_ref().is_ok_and(|e| {
            e.canonical
                && e.fields.run_id_ok
                && e.fields.manifest_ok
                && e.fields.sequence == Some(sequence)
                && e.fields.checksum == checksum
                && e.checksum == checksum
        })
    }
}

#[derive(Debug)]
struct ExaminedEvent<'a> {
    event: Option<ObjectRef<'a>>,
    fields: LinkFields<'a>,
    /// The owner epoch the line's metadata claims (the contract was checked
    /// at it).
    claimed_epoch: Option<u64>,
    contract_ok: bool,
    /// SHA-256 of the canonical event without `checksum`.
    checksum: &'a str,
    /// The line's bytes are exactly the canonical form.
    canonical: bool,
}

/// What linking a line into the chain reads from it (its texts in the
/// line's arena).
#[derive(Debug)]
struct LinkFields<'a> {
    sequence: Option<u64>,
    run_id_ok: bool,
    manifest_ok: bool,
    owner_token: Option<&'a str>,
    previous_checksum: Option<&'a str>,
    checksum: &'a str,
    /// `Some` for a `run_resumed` event: its new owner fingerprint.
    new_owner: Option<Option<&'a str>>,
}

/// The chain-independent rules for one line (shareable between threads).
pub struct LineRules<'a> {
    manifest: &'a RunManifest,
    run_id: &'a str,
    /// Hand the parsed event on (a caller wants it), or drop it where it was
    /// parsed (plain verification: freeing on the parsing thread is cheap).
    keep_events: bool,
}

impl<'a> LineRules<'a> {
    pub fn new(manifest: &'a RunManifest, run_id: &'a str, keep_events: bool) -> Self {
        LineRules {
            manifest,
            run_id,
            keep_events,
        }
    }

    /// `floats_ruled_out`: the canonical reader already refused every
    /// number that is not an integer.
    fn contract_ok(&self, event: &ObjectRef<'_>, epoch: u64, floats_ruled_out: bool) -> bool {
        let contract = EventContract {
            family: self.manifest.contract.family,
            event_types: &self.manifest.contract.event_types,
            limits: &self.manifest.contract.limits,
            epoch,
        };
        (floats_ruled_out || !event.values().any(JsonRef::contains_float))
            && check_event_ref(event, &contract).is_ok()
    }

    /// Framing, size, JSON, contract (at the epoch the line claims),
    /// canonical form and checksum of one line. What is read from it is
    /// made in `arena`.
    pub fn examine<'l>(&self, line: &'l [u8], arena: &'l Bump) -> LineFacts<'l> {
        self.examine_with(line, arena, &mut Scratch::default())
    }

    /// [`Self::examine`] reading on the caller's `scratch` (one per batch).
    fn examine_with<'l>(
        &self,
        line: &'l [u8],
        arena: &'l Bump,
        scratch: &mut Scratch<'l>,
    ) -> LineFacts<'l> {
        let len = line.len() as u64;
        LineFacts {
            len,
            body: self.examine_body(line, arena, scratch),
        }
    }

    fn examine_body<'l>(
        &self,
        line: &'l [u8],
        arena: &'l Bump,
        scratch: &mut Scratch<'l>,
    ) -> Result<ExaminedEvent<'l>, &'static str> {
        let limit = self.manifest.contract.limits.max_receipt_line_bytes;
        if line.len() as u64 >= limit.saturating_add(2) {
            return Err("event too large");
        }
        let content = line.strip_suffix(b"\n").ok_or(INCOMPLETE)?;
        if content.len() as u64 > limit {
            return Err("event too large");
        }
        // A canonical line (every line this tool writes) is read and proven
        // canonical in one pass and hashed as it stands; any other line
        // takes the general path: parse, write the canonical form, compare.
        // `fast`: read by the canonical reader, which refuses floats.
        let (event, canonical, checksum, fast) =
            match canonical_parse::parse_canonical_object_with(content, "checksum", arena, scratch)
            {
                Some((event, hole)) => {
                    let checksum = checksum_around(content, hole, arena);
                    (event, true, checksum, true)
                }
                None => {
                    let json = content.strip_prefix(b"\xef\xbb\xbf").unwrap_or(content);
                    let Ok(value) = serde_json::from_slice::<Value>(json) else {
                        return Err("invalid JSON");
                    };
                    let Value::Object(event) = value else {
                        return Err("invalid event");
                    };
                    let (full, hole) = canonical::object_with_hole(&event, "checksum");
                    let canonical = full == content;
                    let checksum = checksum_around(&full, hole, arena);
                    (ObjectRef::copied(&event, arena), canonical, checksum, false)
                }
            };
        // Phase 2 binds every event to the current owner epoch through its
        // metadata; the contract is checked at the epoch the line claims,
        // and the chain then requires that claim to be the current epoch
        // (the only epoch at which the contract can hold).
        let claimed_epoch = event
            .get("metadata")
            .and_then(|m| m.get("owner_epoch"))
            .and_then(JsonRef::as_u64);
        let contract_ok = self.contract_ok(&event, claimed_epoch.unwrap_or(0), fast);
        let text = |key: &str| event.get(key).and_then(JsonRef::as_str);
        let fields = LinkFields {
            sequence: event.get("sequence").and_then(JsonRef::as_u64),
            run_id_ok: event.get("run_id").and_then(JsonRef::as_str) == Some(self.run_id),
            manifest_ok: event.get("manifest_hash").and_then(JsonRef::as_str)
                == Some(self.manifest.contract.hash.as_str()),
            owner_token: text("owner_token"),
            previous_checksum: text("previous_checksum"),
            checksum: text("checksum").unwrap_or_default(),
            new_owner: (event.get("event_type").and_then(JsonRef::as_str)
                == Some(EventType::RunResumed.as_str()))
            .then(|| {
                event
                    .get("metadata")
                    .and_then(|m| m.get("new_owner_fingerprint"))
                    .and_then(JsonRef::as_str)
            }),
        };
        Ok(ExaminedEvent {
            event: self.keep_events.then_some(event),
            fields,
            claimed_epoch,
            contract_ok,
            checksum,
            canonical,
        })
    }
}

/// Lowercase hex SHA-256 of canonical `bytes` without the member in `hole`
/// (the checksum's pre-image), in `arena`.
fn checksum_around<'l>(
    bytes: &[u8],
    hole: Option<std::ops::Range<usize>>,
    arena: &'l Bump,
) -> &'l str {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    match hole {
        Some(range) => {
            hasher.update(&bytes[..range.start]);
            hasher.update(&bytes[range.end..]);
        }
        None => hasher.update(bytes),
    }
    let mut text = [0u8; 64];
    hex::encode_to_slice(hasher.finalize(), &mut text).expect("64 hex digits for 32 bytes");
    arena.alloc_str(std::str::from_utf8(&text).expect("hex digits"))
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
pub fn event_checksum(event: &Map<String, Value>) -> Sha256Hex {
    Sha256Hex::digest(&canonical::to_vec_without(event, "checksum"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A reader that hands out at most `step` bytes per read, so pieces
    /// cross every kind of read boundary.
    struct Trickle<'a> {
        bytes: &'a [u8],
        step: usize,
    }

    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.step).min(self.bytes.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    /// The pieces [`read_line`] cuts `bytes` into.
    fn by_read_line(bytes: &[u8], cap: u64) -> Vec<Vec<u8>> {
        let mut reader = std::io::BufReader::with_capacity(7, bytes);
        let mut pieces = Vec::new();
        loop {
            let mut line = Vec::new();
            if read_line(&mut reader, cap, &mut line).unwrap() == 0 {
                return pieces;
            }
            pieces.push(line);
        }
    }

    /// The pieces the cutter hands out in batches of at least `want` bytes.
    fn by_cutter(bytes: &[u8], cap: u64, step: usize, want: usize) -> Vec<Vec<u8>> {
        let mut reader = Trickle { bytes, step };
        let mut cutter = LineCutter::new(cap);
        let mut pieces = Vec::new();
        let mut batch = Lines::default();
        loop {
            cutter.fill(&mut reader, &mut batch, want).unwrap();
            pieces.extend(batch.lines().map(<[u8]>::to_vec));
            if cutter.done() {
                return pieces;
            }
        }
    }

    proptest! {
        /// Over any bytes (short and long lines, a last line with no LF,
        /// lines past the cap), any read sizes and batch sizes, the cutter
        /// hands out exactly the pieces `read_line` does, in order.
        #[test]
        fn the_cutter_cuts_as_read_line_does(
            lines in proptest::collection::vec((0usize..40, any::<bool>()), 0..40),
            cap in 1u64..24,
            step in 1usize..50,
            want in 1usize..64,
        ) {
            let mut bytes = Vec::new();
            for (i, (len, lf)) in lines.iter().enumerate() {
                bytes.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, *len));
                if *lf {
                    bytes.push(b'\n');
                }
            }
            prop_assert_eq!(by_cutter(&bytes, cap, step, want), by_read_line(&bytes, cap));
        }
    }
}
