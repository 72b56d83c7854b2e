//! Reliability scenario 5 (docs/reliability.md): hostile input. proptest
//! generates hostile versions of every JSON input a caller hands us and of
//! receipt lines: malformed text, invalid UTF-8, a BOM, trailing garbage,
//! deep nesting, huge values, unknown and missing fields, wrong types,
//! floats, and identifiers with `..`, `/`, NUL or over-long. Each case goes
//! through the real command function in-process (the state root lives on
//! tmpfs, so volume is cheap): never a panic, always a typed error, never a
//! write (the run directory's files keep their size and mtime). A sample of
//! the cases also goes through the binary (exit 2, 3 or 5, a JSON error,
//! never 1 or 101, nothing changed).
//!
//! Kinds: a heartbeat `--input`, a lane-create `--input`, an `--evidence`
//! list (run-recovery-start), an owner handle file, and a receipt line
//! appended after a valid chain (re-sealed with a valid checksum whenever
//! the damage leaves it parseable, so only the contract can catch it).

use crate::reliability;
use bluetape_flow::store::input::JsonArg;
use bluetape_flow::store::root::StateRoot;

use bluetape_flow::commands::inspect::diagnose;
use bluetape_flow::commands::lanes::lane_create;
use bluetape_flow::commands::lifecycle::run_transition;
use bluetape_flow::commands::liveness::heartbeat;
use bluetape_flow::commands::mutate::{MutationContext, OpenMutation};
use bluetape_flow::commands::{ErrorKind, FlowError, verify};
use bluetape_flow::coordinator::run_commands::RunCommand;
use bluetape_flow::receipt::canonical;
use bluetape_flow::receipt::verify::event_checksum;
use bluetape_flow::store::discovery::DiscoveryEnv;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use reliability::{LaneRun, figure, lines, seed, size};
use serde_json::{Map, Value, json};
use std::cell::RefCell;
use std::ffi::OsString;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

const SCENARIO: &str = "5. Hostile input";

/// One hostile change to a valid JSON document.
#[derive(Debug, Clone)]
enum Hostility {
    Truncate(prop::sample::Index),
    RandomBytes(Vec<u8>),
    InvalidUtf8(prop::sample::Index, u8),
    Bom,
    TrailingGarbage(String),
    DeepNesting(prop::sample::Index, usize),
    Huge(prop::sample::Index, usize),
    UnknownField(String),
    MissingField(prop::sample::Index),
    WrongType(prop::sample::Index, prop::sample::Index),
    HostileId(prop::sample::Index, String),
    Float(prop::sample::Index, prop::sample::Index),
}

impl Hostility {
    fn name(&self) -> &'static str {
        match self {
            Hostility::Truncate(_) => "truncated",
            Hostility::RandomBytes(_) => "random bytes",
            Hostility::InvalidUtf8(..) => "invalid UTF-8",
            Hostility::Bom => "BOM",
            Hostility::TrailingGarbage(_) => "trailing garbage",
            Hostility::DeepNesting(..) => "deep nesting",
            Hostility::Huge(..) => "huge",
            Hostility::UnknownField(_) => "unknown field",
            Hostility::MissingField(_) => "missing field",
            Hostility::WrongType(..) => "wrong type",
            Hostility::HostileId(..) => "hostile id",
            Hostility::Float(..) => "float/NaN",
        }
    }
}

/// Identifiers the contract refuses: `..`, `/`, NUL, leading dots or
/// dashes, spaces and non-ASCII, empty, over-long.
fn hostile_id() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("..".to_string()),
        Just(String::new()),
        "\\.\\.(/[a-z]{1,5}){1,3}",
        "[a-z]{0,4}/[a-z./]{0,6}",
        "/[a-z]{1,8}",
        "[a-z]{0,4}\u{0}[a-z]{0,4}",
        "[a-z0-9]{129,400}",
        "[.\\-_][a-z0-9]{0,8}",
        "[a-z]{1,4}[ \\\\:*?é\u{202e}][a-z]{0,4}",
    ]
}

fn hostility() -> impl Strategy<Value = Hostility> {
    prop_oneof![
        any::<prop::sample::Index>().prop_map(Hostility::Truncate),
        prop::collection::vec(any::<u8>(), 0..256).prop_map(Hostility::RandomBytes),
        (any::<prop::sample::Index>(), 0x80u8..=0xff)
            .prop_map(|(i, b)| Hostility::InvalidUtf8(i, b)),
        Just(Hostility::Bom),
        "[a-z{}\\[\\],:\"0-9]{1,8}".prop_map(Hostility::TrailingGarbage),
        (
            any::<prop::sample::Index>(),
            // Depth 1 would be an empty list, which some fields allow.
            prop_oneof![2usize..128, 128usize..5000]
        )
            .prop_map(|(i, d)| Hostility::DeepNesting(i, d)),
        (
            any::<prop::sample::Index>(),
            prop_oneof![9 => 600usize..70_000, 1 => 1_000_000usize..1_100_000]
        )
            .prop_map(|(i, n)| Hostility::Huge(i, n)),
        "[a-z_]{1,12}".prop_map(Hostility::UnknownField),
        any::<prop::sample::Index>().prop_map(Hostility::MissingField),
        (any::<prop::sample::Index>(), any::<prop::sample::Index>())
            .prop_map(|(i, v)| Hostility::WrongType(i, v)),
        (any::<prop::sample::Index>(), hostile_id())
            .prop_map(|(i, id)| Hostility::HostileId(i, id)),
        (any::<prop::sample::Index>(), any::<prop::sample::Index>())
            .prop_map(|(i, f)| Hostility::Float(i, f)),
    ]
}

/// The shape of one kind of input: its valid base, the fields a change may
/// hit, the fields that must be present, and the identifier fields.
struct Shape {
    base: Value,
    /// Where structural changes apply: a path of keys/indices to an object.
    object_at: Vec<Key>,
    fields: Vec<String>,
    required: Vec<String>,
    ids: Vec<&'static str>,
    /// Values of another type than the field's valid ones.
    wrong: Vec<Value>,
    bom_is_valid: bool,
}

#[derive(Clone)]
enum Key {
    Index(usize),
}

fn object_mut<'v>(value: &'v mut Value, at: &[Key]) -> &'v mut Map<String, Value> {
    let mut cursor = value;
    for key in at {
        cursor = match key {
            Key::Index(i) => cursor.get_mut(*i).unwrap(),
        };
    }
    cursor.as_object_mut().unwrap()
}

/// The hostile document, and whether it is still a JSON value (then it can
/// be re-sealed when it is a receipt line).
fn apply(shape: &Shape, hostility: &Hostility) -> (Vec<u8>, Option<Value>) {
    let text = canonical::to_vec(&shape.base);
    let mut value = shape.base.clone();
    let structural = |value: &mut Value, change: &dyn Fn(&mut Map<String, Value>)| {
        change(object_mut(value, &shape.object_at));
    };
    match hostility {
        Hostility::Truncate(i) => {
            // At least one byte stays (an empty receipt line would be no line).
            let cut = 1 + i.index(text.len() - 1);
            return (text[..cut].to_vec(), None);
        }
        Hostility::RandomBytes(bytes) => return (bytes.clone(), None),
        Hostility::InvalidUtf8(i, b) => {
            let mut t = text.clone();
            t.insert(i.index(t.len()), *b);
            return (t, None);
        }
        Hostility::Bom => {
            // Where a leading BOM is legal (receipt lines, like the
            // reference), it goes inside the object instead.
            let at = usize::from(shape.bom_is_valid);
            let mut t = text.clone();
            t.splice(at..at, *b"\xef\xbb\xbf");
            return (t, None);
        }
        Hostility::TrailingGarbage(g) => {
            let mut t = text.clone();
            t.extend_from_slice(g.as_bytes());
            return (t, None);
        }
        Hostility::DeepNesting(i, depth) => {
            let field = shape.fields[i.index(shape.fields.len())].as_str();
            // The field's value becomes `depth` nested lists.
            let lists = [vec![b'['; *depth], vec![b']'; *depth]].concat();
            return replace_value(&value, field, &lists);
        }
        Hostility::Huge(i, n) => {
            let field = shape.fields[i.index(shape.fields.len())].as_str();
            structural(&mut value, &|m| {
                m.insert(field.into(), Value::String("x".repeat(*n)));
            });
        }
        Hostility::UnknownField(name) => {
            let name = if shape.fields.contains(name) {
                format!("{name}_extra")
            } else {
                name.clone()
            };
            structural(&mut value, &|m| {
                m.insert(name.clone(), json!("surprise"));
            });
        }
        Hostility::MissingField(i) => {
            let field = shape.required[i.index(shape.required.len())].as_str();
            structural(&mut value, &|m| {
                m.remove(field);
            });
        }
        Hostility::WrongType(i, v) => {
            let field = shape.fields[i.index(shape.fields.len())].as_str();
            let wrong = shape.wrong[v.index(shape.wrong.len())].clone();
            structural(&mut value, &|m| {
                m.insert(field.into(), wrong.clone());
            });
        }
        Hostility::HostileId(i, id) => {
            let field = shape.ids[i.index(shape.ids.len())];
            structural(&mut value, &|m| {
                m.insert(field.into(), Value::String(id.clone()));
            });
        }
        Hostility::Float(i, f) => {
            let field = shape.fields[i.index(shape.fields.len())].as_str();
            let text = ["1.5", "-0.0", "1e400", "NaN", "Infinity", "7.0"][f.index(6)];
            return replace_value(&value, field, text.as_bytes());
        }
    }
    (canonical::to_vec(&value), Some(value))
}

/// `value`'s canonical bytes with the value of `field` swapped for the raw
/// bytes `with` (which serde_json could not write), and whether that is
/// still JSON; the bytes unchanged when the field is not there.
fn replace_value(value: &Value, field: &str, with: &[u8]) -> (Vec<u8>, Option<Value>) {
    let inner = canonical::to_vec(value);
    let key = format!("\"{field}\":");
    let Some(at) = find(&inner, key.as_bytes()) else {
        return (inner, None);
    };
    let start = at + key.len();
    let end = value_end(&inner, start);
    let t = [&inner[..start], with, &inner[end..]].concat();
    let reparsed = serde_json::from_slice(&t).ok();
    (t, reparsed)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The end of the JSON value starting at `start` in canonical text.
fn value_end(text: &[u8], start: usize) -> usize {
    let (mut depth, mut in_string, mut escaped) = (0i32, false, false);
    for (offset, &b) in text[start..].iter().enumerate() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => {
                    in_string = false;
                    if depth == 0 {
                        return start + offset + 1;
                    }
                }
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => depth += 1,
            b']' | b'}' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    return start + offset + 1;
                }
            }
            b',' | b'}' | b']' if depth == 0 => return start + offset,
            _ => {}
        }
    }
    text.len()
}

/// The in-process fixture: a running run on tmpfs.
struct Fixture {
    run: LaneRun,
    _tmp: tempfile::TempDir,
    receipt: Vec<u8>,
}

fn fixture() -> Fixture {
    let shm = Path::new("/dev/shm");
    let tmp = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let run = LaneRun::new(&base, &["w0"]);
    run.beat("w0", "base");
    let receipt = run.receipt();
    Fixture {
        run,
        _tmp: tmp,
        receipt,
    }
}

impl Fixture {
    fn ctx(&self, owner: &Path) -> MutationContext {
        MutationContext {
            root: StateRoot::begin(&self.run.root),
            run_id: self.run.run_id.clone(),
            owner_file: owner.to_path_buf(),
            expected_head: None,
            now: chrono::Utc::now(),
            at: None,
            env: DiscoveryEnv {
                cwd: self.run.base.clone(),
                home: Some(self.run.flow.home.clone().into()),
                ..Default::default()
            },
        }
    }

    /// Size and mtime of every file of the run directory (and lanes/).
    fn fingerprint(&self) -> Vec<(PathBuf, u64, i64, i64)> {
        let mut out = Vec::new();
        for dir in [self.run.run_dir(), self.run.run_dir().join("lanes")] {
            for path in crate::bed::sorted_entries(&dir) {
                let meta = std::fs::symlink_metadata(&path).unwrap();
                if meta.is_file() {
                    out.push((path, meta.len(), meta.mtime(), meta.mtime_nsec()));
                }
            }
        }
        out
    }

    /// `command` as the owner with `--evidence <valid evidence> --input
    /// <input>`.
    fn evidence_and_input(&self, command: &str, input: impl Into<OsString>) -> Vec<OsString> {
        let evidence = self.valid_evidence();
        self.run.mutation_args(
            command,
            &[
                "--evidence".into(),
                evidence.into(),
                "--input".into(),
                input.into(),
            ],
        )
    }

    /// `command` run in-process as `owner` with valid evidence and `input`:
    /// Ok when it is refused with a typed error.
    fn with_evidence<T: serde::Serialize>(
        &self,
        owner: &Path,
        input: &Path,
        command: fn(&OpenMutation, &JsonArg) -> Result<T, FlowError>,
    ) -> Result<(), String> {
        let evidence = given(&self.valid_evidence());
        typed(
            self.ctx(owner)
                .open_with_evidence(&evidence)
                .and_then(|mutation| command(&mutation, &given(input))),
        )
    }

    fn valid_evidence(&self) -> PathBuf {
        self.run.input(
            "valid-ev.json",
            &json!([{"kind": "log", "summary": "never recorded"}]),
        )
    }
}

/// A JSON input file as a command line names it.
fn given(file: &Path) -> JsonArg {
    JsonArg::Given(file.to_path_buf())
}

/// What one kind does with a hostile document.
struct Kind {
    name: &'static str,
    shape: Shape,
    /// Run in-process: Err(typed) expected.
    library: fn(&Fixture, &Path) -> Result<(), String>,
    /// The argv of the same case through the binary.
    binary: fn(&Fixture, &Path) -> Vec<OsString>,
    /// Where the hostile bytes are written.
    file: fn(&Fixture) -> PathBuf,
}

/// The keys of the object `value`.
fn keys(value: &Value) -> Vec<String> {
    value.as_object().unwrap().keys().cloned().collect()
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|n| n.to_string()).collect()
}

fn typed(result: Result<impl serde::Serialize, FlowError>) -> Result<(), String> {
    match result {
        Err(_) => Ok(()),
        Ok(out) => Err(format!("accepted: {}", json!(out))),
    }
}

/// The shape of a `--input` object whose every field is required: the
/// keys of `base`, the test's own statement of the shape (not the input
/// type's, which is what is under test).
fn every_field_required(base: Value, ids: &[&'static str], wrong: &[Value]) -> Shape {
    let fields = keys(&base);
    Shape {
        base,
        object_at: vec![],
        required: fields.clone(),
        fields,
        ids: ids.to_vec(),
        wrong: wrong.to_vec(),
        bom_is_valid: false,
    }
}

fn kinds(f: &Fixture) -> Vec<Kind> {
    let wrong = vec![
        json!(true),
        json!(12345),
        json!([1]),
        json!({"x": 1}),
        Value::Null,
    ];
    let run_id = f.run.run_id.clone();
    vec![
        Kind {
            name: "heartbeat --input",
            shape: every_field_required(
                json!({"lane_id": "w0", "agent_id": "agent-w0", "observed_at": "2026-07-14T01:02:00Z",
                       "silence_lease_deadline": "2026-07-14T01:06:00Z", "reason": "alive"}),
                &["lane_id", "agent_id"],
                &wrong,
            ),
            library: |f, file| f.with_evidence(&f.run.owner, file, heartbeat),
            binary: |f, file| f.evidence_and_input("heartbeat", file),
            file: |f| f.run.inputs.join("hostile-input.json"),
        },
        Kind {
            name: "lane-create --input",
            shape: every_field_required(
                json!({"lane_id": "n1", "agent_id": "agent-n1", "assignment": "work",
                       "write_scope": ["src"], "fallback": "main", "observed_at": "2026-07-14T01:00:00Z",
                       "startup_ack_deadline": "2026-07-14T01:00:30Z",
                       "command_deadline": "2099-01-01T00:00:00Z"}),
                &["lane_id", "agent_id", "parent_lane_id"],
                &wrong,
            ),
            library: |f, file| f.with_evidence(&f.run.owner, file, lane_create),
            binary: |f, file| f.evidence_and_input("lane-create", file),
            file: |f| f.run.inputs.join("hostile-lane.json"),
        },
        Kind {
            name: "--evidence list (run-recovery-start)",
            shape: Shape {
                base: json!([{"kind": "log", "summary": "recovering", "path": "logs/a.txt",
                              "checksum": "bd6d4e1d37d148f790ff1bfe7b2784ba4d24c94fbad31cdeb749f02209c43611",
                              "exit_status": 0}]),
                object_at: vec![Key::Index(0)],
                fields: names(&["kind", "summary", "path", "checksum", "exit_status"]),
                required: names(&["kind", "summary"]),
                // Evidence has no identifiers; its checksum is the field
                // with a strict shape (64 lowercase hex).
                ids: vec!["checksum"],
                wrong: vec![json!(true), json!([1]), json!({"x": 1})],
                bom_is_valid: false,
            },
            library: |f, file| {
                typed(
                    f.ctx(&f.run.owner)
                        .open_with_evidence(&given(file))
                        .and_then(|m| {
                            run_transition(&m, RunCommand::RecoveryStart, Some("hostile evidence"))
                        }),
                )
            },
            binary: |f, file| {
                f.run.mutation_args(
                    "run-recovery-start",
                    &[
                        "--evidence".into(),
                        file.into(),
                        "--reason".into(),
                        "hostile evidence".into(),
                    ],
                )
            },
            file: |f| f.run.inputs.join("hostile-evidence.json"),
        },
        Kind {
            name: "owner handle file (heartbeat --owner-file)",
            shape: Shape {
                base: json!({"epoch": 1, "run_id": run_id, "token": "5b12fa0b8bfd4c589bbd6c3637d25097"}),
                object_at: vec![],
                fields: names(&["epoch", "run_id", "token"]),
                required: names(&["epoch", "run_id", "token"]),
                ids: vec!["run_id"],
                wrong: wrong.clone(),
                bom_is_valid: false,
            },
            library: |f, file| f.with_evidence(file, &f.run.inputs.join("beat-w0.json"), heartbeat),
            binary: |f, file| {
                let mut argv = f.evidence_and_input("heartbeat", f.run.inputs.join("beat-w0.json"));
                let owner = argv.iter().position(|a| a == "--owner-file").unwrap() + 1;
                argv[owner] = file.into();
                argv
            },
            file: |f| f.run.root.join("handles/hostile.owner"),
        },
    ]
}

/// The next receipt line's base: the last event re-numbered and re-chained
/// (valid on its own), so every change is the only thing wrong.
fn next_line_shape(f: &Fixture) -> Shape {
    let all = lines(&f.receipt);
    let last: Value = serde_json::from_slice(all.last().unwrap()).unwrap();
    let mut next = last.as_object().unwrap().clone();
    next.insert("sequence".into(), json!(all.len() + 1));
    next.insert("previous_checksum".into(), last["checksum"].clone());
    let checksum = event_checksum(&next);
    next.insert("checksum".into(), json!(checksum));
    // Every key a written line has, metadata and checksum included.
    let next = Value::Object(next);
    let required = keys(&next);
    Shape {
        base: next,
        object_at: vec![],
        // Values change in every key but the checksum; the checksum is
        // only dropped.
        fields: required
            .iter()
            .filter(|k| *k != "checksum")
            .cloned()
            .collect(),
        required,
        ids: vec!["run_id", "lane_id", "agent_id"],
        wrong: vec![json!(true), json!(12345), json!([1]), json!({"x": 1})],
        bom_is_valid: true,
    }
}

#[derive(Default)]
struct Count {
    cases: u64,
    binary: u64,
    by_hostility: std::collections::BTreeMap<&'static str, u64>,
}

fn runner(cases: u64, salt: u64) -> TestRunner {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed().to_le_bytes());
    bytes[8..16].copy_from_slice(&salt.to_le_bytes());
    TestRunner::new_with_rng(
        Config {
            cases: cases as u32,
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    )
}

fn binary_refused(f: &Fixture, argv: &[OsString], what: &str) -> Result<(), TestCaseError> {
    let before = f.fingerprint();
    let out = f.run.flow.run(argv);
    prop_assert!(
        matches!(out.code, 2 | 3 | 5),
        "{}: binary exit {}: {}",
        what,
        out.code,
        out.stderr
    );
    let e = out.error();
    prop_assert_eq!(&e["ok"], &json!(false));
    prop_assert!(e["error"].is_string() && e["message"].is_string());
    prop_assert!(before == f.fingerprint(), "{}: the binary wrote", what);
    Ok(())
}

#[test]
fn reliability_hostile_input_json_inputs_never_panic_write_or_pass() {
    let per_kind = size(500, 25_000);
    let f = fixture();
    let binary_every = (per_kind / size(8, 120)).max(1);
    let mut total = 0;
    let mut lines_out = Vec::new();
    for (salt, kind) in kinds(&f).into_iter().enumerate() {
        let count = RefCell::new(Count::default());
        let path = (kind.file)(&f);
        let mut runner = runner(per_kind, salt as u64);
        let result = runner.run(&hostility(), |h| {
            let (bytes, _) = apply(&kind.shape, &h);
            std::fs::write(&path, &bytes).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            let before = f.fingerprint();
            let outcome = (kind.library)(&f, &path);
            prop_assert!(outcome.is_ok(), "{} {:?}: {:?}", kind.name, h, outcome);
            prop_assert!(before == f.fingerprint(), "{} {:?}: wrote", kind.name, h);
            let mut c = count.borrow_mut();
            c.cases += 1;
            *c.by_hostility.entry(h.name()).or_default() += 1;
            if c.cases % binary_every == 0 {
                c.binary += 1;
                drop(c);
                binary_refused(&f, &(kind.binary)(&f, &path), kind.name)?;
            }
            Ok(())
        });
        result.unwrap_or_else(|e| panic!("{}: {e}", kind.name));
        let c = count.into_inner();
        total += c.cases;
        let mix: Vec<String> = c
            .by_hostility
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        lines_out.push((kind.name, c.cases, c.binary, mix.join(", ")));
    }
    for (name, cases, binary, mix) in lines_out {
        figure(
            SCENARIO,
            &format!("{name}: generated hostile files ({mix})"),
            cases,
            &format!(
                "{cases} typed errors from the real command in-process, 0 panics, 0 writes; {binary} also through the binary (exit 2/3/5 with a JSON error, nothing changed)"
            ),
        );
    }
    assert_eq!(total, 4 * per_kind);
}

#[test]
fn reliability_hostile_input_receipt_lines_never_panic_or_verify() {
    let cases = size(500, 25_000);
    let f = fixture();
    let shape = next_line_shape(&f);
    let receipt_path = f.run.receipt_path();
    let next_sequence = lines(&f.receipt).len() as u64 + 1;
    let binary_every = (cases / size(8, 120)).max(1);
    let count = RefCell::new(Count::default());
    let mut runner = runner(cases, 99);
    let result = runner.run(&hostility(), |h| {
        let (mut bytes, value) = apply(&shape, &h);
        if let Some(Value::Object(mut event)) = value.filter(|v| v.get("checksum").is_some()) {
            // Re-seal, so a valid checksum cannot save the line.
            let checksum = event_checksum(&event);
            event.insert("checksum".into(), json!(checksum));
            bytes = canonical::to_vec(&Value::Object(event));
        }
        if !matches!(h, Hostility::Truncate(_)) {
            bytes.push(b'\n');
        }
        let mut receipt = f.receipt.clone();
        receipt.extend_from_slice(&bytes);
        std::fs::write(&receipt_path, &receipt).unwrap();
        let before = f.fingerprint();
        let verified = verify(&StateRoot::begin(&f.run.root), &f.run.run_id);
        let damaged = matches!(
            verified.as_ref().map_err(FlowError::kind),
            Err(ErrorKind::ReceiptDamaged(d)) if d.first_bad_sequence == next_sequence
        );
        prop_assert!(damaged, "{:?}: verify said {:?}", h, verified);
        let diagnosis = diagnose(&StateRoot::begin(&f.run.root), &f.run.run_id).map(|d| json!(d));
        prop_assert!(
            matches!(&diagnosis, Ok(d) if d["first_bad_sequence"] == next_sequence),
            "{:?}: diagnose said {:?}",
            h,
            diagnosis
        );
        prop_assert!(before == f.fingerprint(), "{:?}: wrote", h);
        let mut c = count.borrow_mut();
        c.cases += 1;
        *c.by_hostility.entry(h.name()).or_default() += 1;
        if c.cases % binary_every == 0 {
            c.binary += 1;
            drop(c);
            let out = f.run.read("verify", &[]);
            prop_assert_eq!(out.code, 3, "{:?}: {}", h, out.stderr);
            prop_assert!(before == f.fingerprint());
        }
        Ok(())
    });
    std::fs::write(&receipt_path, &f.receipt).unwrap();
    result.unwrap();
    let c = count.into_inner();
    figure(
        SCENARIO,
        &format!(
            "receipt lines appended after a valid chain, re-sealed with a valid checksum when parseable ({})",
            reliability::counts(&c.by_hostility, " ")
        ),
        c.cases,
        &format!(
            "{} detected by verify and receipt-diagnose at the appended sequence, 0 panics, 0 writes; {} also through the binary (verify exit 3)",
            c.cases, c.binary
        ),
    );
    assert_eq!(c.cases, cases);
}
