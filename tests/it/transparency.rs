//! The run's receipt as a transparency log (contracts/transparency.md).
//! Signed heads (C2SP checkpoints), the stored tree, inclusion and
//! consistency proofs, through the real binary, and checked by verifiers
//! nobody here wrote: a Go program (tests/go/tlogcheck) built against
//! Debian's golang.org/x/mod/sumdb/note and sumdb/tlog. Missing `go` is a
//! failure, never a skip.

use crate::bed as common;

use bluetape_flow::receipt::merkle::{MemoryHashes, stored_hash_count};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::bed::{TestBed as Run, ev};
use common::Output;

// ---------------------------------------------------------------- helpers

/// The Go checker, built once per test binary (GOPATH mode, nothing
/// downloaded).
fn go_checker() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let install = "apt-get install -y golang-go golang-golang-x-mod-dev (.ci/run does)";
        let version = Command::new("go").arg("version").output();
        assert!(
            version.as_ref().is_ok_and(|o| o.status.success()),
            "`go` is required for the interop tests: {install}"
        );
        let gopath = Path::new("/usr/share/gocode");
        assert!(
            gopath
                .join("src/golang.org/x/mod/sumdb/note/note.go")
                .is_file()
                && gopath
                    .join("src/golang.org/x/mod/sumdb/tlog/tlog.go")
                    .is_file(),
            "golang.org/x/mod/sumdb is required under {}: {install}",
            gopath.display()
        );
        let work = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("tlogcheck-{}", std::process::id()));
        std::fs::create_dir_all(&work).unwrap();
        let binary = work.join("tlogcheck");
        let out = Command::new("go")
            .args(["build", "-o"])
            .arg(&binary)
            .arg(".")
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go/tlogcheck"))
            .env("GO111MODULE", "off")
            .env("GOPATH", gopath)
            .env("GOCACHE", work.join("cache"))
            .env("GOFLAGS", "")
            .env("GOPROXY", "off")
            .output()
            .unwrap();
        crate::bed::assert_ran(&out, "go build");
        binary
    })
}

/// Run the Go checker on a job; returns its result object.
fn go_check(dir: &Path, job: &Value) -> Value {
    let path = dir.join(format!("job-{}.json", rand_suffix()));
    std::fs::write(&path, job.to_string()).unwrap();
    let out = Command::new(go_checker()).arg(&path).output().unwrap();
    crate::bed::assert_ran(&out, "tlogcheck");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["errors"], Value::Null, "Go disagrees: {result}");
    result
}

fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// A key pair made by `key-generate`: the signer key file and a file
/// holding the verifier key.
struct Keys {
    signer: PathBuf,
    verifier: PathBuf,
    vkey: String,
    hash: String,
}

fn keygen(run: &Run, name: &str) -> Keys {
    let signer = run.tmp.path().join(format!("{}.key", rand_suffix()));
    let out = run
        .raw(&[
            "key-generate",
            "--name",
            name,
            "--out",
            signer.to_str().unwrap(),
        ])
        .assert_ok();
    let vkey = out["verifier_key"].as_str().unwrap().to_string();
    let verifier = run.tmp.path().join(format!("{}.pub", rand_suffix()));
    std::fs::write(&verifier, format!("{vkey}\n")).unwrap();
    Keys {
        signer,
        verifier,
        vkey,
        hash: out["key_hash"].as_str().unwrap().to_string(),
    }
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn sign(run: &Run, keys: &Keys) -> Value {
    sign_head(run, keys).assert_ok()
}

/// `sign-head` with `keys`' signer key, whatever it answers.
fn sign_head(run: &Run, keys: &Keys) -> Output {
    run.read("sign-head", &["--key", s(&keys.signer)])
}

/// `verify --key` with the run's verifier key must accept the run.
fn verify_with_key(run: &Run, keys: &Keys) -> Value {
    verify_with_key_and(run, keys, &[])
}

/// [`verify_with_key`] with more arguments (`--head`, say).
fn verify_with_key_and(run: &Run, keys: &Keys, more: &[&str]) -> Value {
    verify_keyed(run, keys, more).assert_ok()
}

/// `verify --key <the run's verifier key>` plus `more`, whatever it answers.
fn verify_keyed(run: &Run, keys: &Keys, more: &[&str]) -> Output {
    let mut args = vec![
        "verify",
        "--run-id",
        &run.run_id,
        "--key",
        s(&keys.verifier),
    ];
    args.extend_from_slice(more);
    run.raw(&args)
}

fn write(run: &Run, name: &str, bytes: &[u8]) -> PathBuf {
    let path = run.tmp.path().join(format!("{}-{name}", rand_suffix()));
    std::fs::write(&path, bytes).unwrap();
    path
}

fn lines(run: &Run) -> Vec<String> {
    std::fs::read_to_string(run.dir.join("receipt.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A running run with a running lane `build`, grown by heartbeats (fresh
/// evidence each) to `events` events; `at(size)` runs after each event.
fn grow(run: &Run, events: usize, mut at: impl FnMut(usize)) {
    let mut n = lines(run).len();
    while n < events {
        run.heartbeat("build", &ev(&format!("progress {}", rand_suffix())));
        n = lines(run).len();
        at(n);
    }
}

fn lane_run() -> Run {
    let run = Run::running(&["runtime"]);
    run.running_lane("build", None);
    run
}

/// A [`lane_run`] grown to `events` lines, with a key pair named `name`.
fn grown_with_keys(name: &str, events: usize) -> (Run, Keys) {
    let run = lane_run();
    let keys = keygen(&run, name);
    grow(&run, events, |_| {});
    (run, keys)
}

/// `check-proof` of an inclusion proof text and an event line.
fn check_inclusion(
    run: &Run,
    proof: &[u8],
    event: &[u8],
    keys: &[&Path],
    extra: &[&str],
) -> Output {
    let proof = write(run, "proof", proof);
    let event = write(run, "event", event);
    let mut argv = vec!["check-proof", "--proof", s(&proof), "--event", s(&event)];
    for k in keys {
        argv.extend(["--key", s(k)]);
    }
    argv.extend_from_slice(extra);
    run.flow.run(&argv)
}

fn check_append(run: &Run, proof: &[u8], keys: &[&Path], extra: &[&str]) -> Output {
    let proof = write(run, "append", proof);
    let mut argv = vec!["check-proof", "--append", s(&proof)];
    for k in keys {
        argv.extend(["--key", s(k)]);
    }
    argv.extend_from_slice(extra);
    run.flow.run(&argv)
}

/// A proof refused by us: exit 3 `proof_invalid` (no state root is
/// involved, DEVIATIONS 90), typed, nothing on stdout.
#[track_caller]
fn refused_proof(out: Output) {
    out.assert_error(3, "proof_invalid");
    assert!(out.error().get("next_command").is_none(), "{out:?}");
    assert!(
        crate::bed::str_field(&out.error(), "message").starts_with("proof does not verify"),
        "{out:?}"
    );
}

fn prove_event(run: &Run, sequence: usize, head: Option<&Path>) -> Value {
    let sequence = sequence.to_string();
    let mut argv = vec![
        "prove-event",
        "--run-id",
        &run.run_id,
        "--sequence",
        &sequence,
    ];
    if let Some(head) = head {
        argv.extend(["--head", s(head)]);
    }
    run.raw(&argv).assert_ok()
}

fn prove_append(run: &Run, from: &Path, head: Option<&Path>) -> Value {
    let mut argv = vec!["prove-append", "--run-id", &run.run_id, "--from", s(from)];
    if let Some(head) = head {
        argv.extend(["--head", s(head)]);
    }
    run.raw(&argv).assert_ok()
}

fn canonical(value: &Value) -> Vec<u8> {
    bluetape_flow::receipt::canonical::to_vec(value)
}

/// Our stored hashes, recomputed from the receipt lines in the test.
fn expected_tree(lines: &[String]) -> Vec<u8> {
    let mut tree = MemoryHashes::default();
    for line in lines {
        tree.push_line(line.as_bytes()).unwrap();
    }
    tree.hashes.iter().flat_map(|h| h.0).collect()
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

// ------------------------------------------------------------------ tests

/// The 50-event run: heads at ten sizes (around subtree boundaries), every
/// event proven in the newest head and in a middle head, every pair of
/// heads proven consistent; all checked by us and by Go's note/tlog, with
/// every bit of one inclusion proof, one consistency proof and the key
/// flipped (Go) and a sample of them through our check-proof.
#[test]
fn go_checks_every_event_and_every_pair_of_heads_of_a_50_event_run() {
    let run = lane_run();
    let keys = keygen(&run, "ci.example/bluetape");
    let sizes = [7usize, 8, 9, 15, 16, 17, 31, 32, 33, 50];
    let mut heads: Vec<(usize, PathBuf, String)> = Vec::new();
    grow(&run, 50, |n| {
        if sizes.contains(&n) {
            let out = sign(&run, &keys);
            assert_eq!(out["size"], n);
            let note = out["note"].as_str().unwrap().to_string();
            let path = run.root.join(out["path"].as_str().unwrap());
            assert_eq!(std::fs::read_to_string(&path).unwrap(), note);
            assert_eq!(mode(&path), 0o600);
            heads.push((n, write(&run, "head.note", note.as_bytes()), note));
        }
    });
    assert_eq!(heads.len(), sizes.len());
    let all = lines(&run);
    assert_eq!(all.len(), 50);
    // Stored hashes: exactly Go tlog's stored-hash order (Go compares too).
    let tree = std::fs::read(run.dir.join("tree-hashes")).unwrap();
    assert_eq!(tree.len() as u64, stored_hash_count(50) * 32);
    assert_eq!(tree, expected_tree(&all));
    assert_eq!(mode(&run.dir.join("tree-hashes")), 0o600);
    assert_eq!(mode(&run.dir.join("heads")), 0o700);

    let origin = format!("bluetape-flow/{}", run.run_id);
    let middle = &heads[4]; // size 16
    let mut inclusion = Vec::new();
    for sequence in 1..=50 {
        let out = prove_event(&run, sequence, None);
        assert_eq!(out["size"], 50);
        assert_eq!(out["sequence"], sequence);
        assert_eq!(out["event"], all[sequence - 1]);
        let proof = out["proof"].as_str().unwrap();
        assert!(proof.starts_with(&format!("c2sp.org/tlog-proof@v1\nindex {}\n", sequence - 1)));
        assert!(proof.ends_with(&heads[9].2));
        let ok = check_inclusion(
            &run,
            proof.as_bytes(),
            all[sequence - 1].as_bytes(),
            &[&keys.verifier],
            &[],
        )
        .assert_ok();
        assert_eq!(ok["verified"], true);
        assert_eq!(ok["sequence"], sequence);
        assert_eq!(ok["size"], 50);
        inclusion
            .push(json!({"proof": proof, "event": all[sequence - 1], "sweep": sequence == 20}));
        if sequence <= 16 {
            let out = prove_event(&run, sequence, Some(&middle.1));
            assert_eq!(out["size"], 16);
            let proof = out["proof"].as_str().unwrap();
            check_inclusion(
                &run,
                proof.as_bytes(),
                all[sequence - 1].as_bytes(),
                &[&keys.verifier],
                &["--run-id", &run.run_id],
            )
            .assert_ok();
            inclusion
                .push(json!({"proof": proof, "event": all[sequence - 1], "sweep": sequence == 16}));
        }
    }
    let mut consistency = Vec::new();
    for (i, old) in heads.iter().enumerate() {
        for new in &heads[i..] {
            let out = prove_append(&run, &old.1, Some(&new.1));
            let proof = &out["proof"];
            assert_eq!(proof["old_size"], old.0);
            assert_eq!(proof["new_size"], new.0);
            assert_eq!(proof["old_note"], old.2);
            assert_eq!(proof["new_note"], new.2);
            let ok = check_append(&run, &canonical(proof), &[&keys.verifier], &[]).assert_ok();
            assert_eq!(ok["verified"], true);
            assert_eq!(ok["old_size"], old.0);
            assert_eq!(ok["new_size"], new.0);
            let mut item = proof.clone();
            item["sweep"] = json!(old.0 == 17 && new.0 == 50);
            consistency.push(item);
        }
    }
    // The default new head is the newest stored head.
    assert_eq!(
        prove_append(&run, &heads[0].1, None)["proof"]["new_size"],
        50
    );

    let result = go_check(
        run.tmp.path(),
        &json!({
            "origin": origin, "vkeys": [keys.vkey],
            "receipt": s(&run.dir.join("receipt.jsonl")),
            "tree_hashes": s(&run.dir.join("tree-hashes")),
            "heads": heads.iter().map(|h| h.2.clone()).collect::<Vec<_>>(),
            "inclusion": inclusion, "consistency": consistency,
            "key_sweep_note": heads[9].2,
        }),
    );
    eprintln!("Go's verdicts on the 50-event run: {result}");
    assert_eq!(result["leaves"], 50);
    assert_eq!(result["tree_hashes_equal"], true);
    assert_eq!(result["heads_ok"], 10);
    assert_eq!(result["inclusion_ok"], 66);
    assert_eq!(result["consistency_ok"], 55);
    assert!(
        result["sweep_refused"].as_u64().unwrap() > 20_000,
        "{result}"
    );

    // Our side of the sweep: a flipped bit across the whole proof, the
    // event, the consistency proof and the key (a sample of positions
    // through the binary; the unit tests flip every bit of notes and keys).
    let proof = inclusion[19 + 16]["proof"]
        .as_str()
        .unwrap()
        .as_bytes()
        .to_vec();
    let event = all[19].as_bytes().to_vec();
    check_inclusion(&run, &proof, &event, &[&keys.verifier], &[]).assert_ok();
    for i in (0..proof.len()).step_by(9) {
        let mut bad = proof.clone();
        bad[i] ^= 1 << (i % 8);
        refused_proof(check_inclusion(&run, &bad, &event, &[&keys.verifier], &[]));
    }
    for i in (0..event.len()).step_by(37) {
        let mut bad = event.clone();
        bad[i] ^= 1 << (i % 8);
        refused_proof(check_inclusion(&run, &proof, &bad, &[&keys.verifier], &[]));
    }
    let append = canonical(
        &consistency
            .iter()
            .find(|c| c["sweep"] == true)
            .unwrap()
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| *k != "sweep")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<serde_json::Map<_, _>>()
            .into(),
    );
    check_append(&run, &append, &[&keys.verifier], &[]).assert_ok();
    for i in (0..append.len()).step_by(13) {
        let mut bad = append.clone();
        bad[i] ^= 1 << (i % 8);
        refused_proof(check_append(&run, &bad, &[&keys.verifier], &[]));
    }
    for i in 0..keys.vkey.len() {
        let mut bad = keys.vkey.clone().into_bytes();
        bad[i] ^= 1 << (i % 8);
        let file = write(&run, "bad.pub", &bad);
        let out = check_inclusion(&run, &proof, &event, &[&file], &[]);
        assert!(matches!(out.code, 2 | 3), "key byte {i}: {out:?}");
        assert!(out.stdout.is_empty(), "key byte {i}: {out:?}");
    }
}

/// Index or size off by one, a wrong origin, a note signed only by an
/// unknown key, an unsigned note: refused by us and by Go.
#[test]
fn targeted_negatives_are_refused_by_us_and_by_go() {
    let run = lane_run();
    let keys = keygen(&run, "log.example");
    let stranger = keygen(&run, "log.example");
    grow(&run, 12, |_| {});
    let old = sign(&run, &keys);
    let old_note = old["note"].as_str().unwrap().to_string();
    let old_file = write(&run, "old.note", old_note.as_bytes());
    grow(&run, 20, |_| {});
    let new_note = sign(&run, &keys)["note"].as_str().unwrap().to_string();
    let all = lines(&run);
    let vkey: &Path = &keys.verifier;

    let out = prove_event(&run, 5, None);
    let proof = out["proof"].as_str().unwrap().to_string();
    let event = all[4].clone();
    check_inclusion(&run, proof.as_bytes(), event.as_bytes(), &[vkey], &[]).assert_ok();
    let append = prove_append(&run, &old_file, None)["proof"].clone();

    let mut refuse_inclusion = Vec::new();
    let mut refuse_consistency = Vec::new();
    let mut refuse = |why: &str,
                      proof: String,
                      event: String,
                      vkeys: Option<Vec<String>>,
                      origin: Option<String>| {
        let key_file = vkeys
            .as_ref()
            .map(|k| write(&run, "k.pub", format!("{}\n", k.join("\n")).as_bytes()));
        let extra: Vec<String> = origin
            .as_ref()
            .map(|o| {
                vec![
                    "--run-id".to_string(),
                    o.trim_start_matches("bluetape-flow/").to_string(),
                ]
            })
            .unwrap_or_default();
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        refused_proof(check_inclusion(
            &run,
            proof.as_bytes(),
            event.as_bytes(),
            &[key_file.as_deref().unwrap_or(vkey)],
            &extra,
        ));
        refuse_inclusion.push(json!({"proof": proof, "event": event, "vkeys": vkeys, "origin": origin.unwrap_or_default(), "why": why}));
    };
    // Index off by one, both ways (with the event it claims, and with the
    // neighbouring event).
    for (index, event_at) in [(3usize, 4usize), (5, 4), (3, 3), (5, 5)] {
        let bad = proof.replacen("index 4\n", &format!("index {index}\n"), 1);
        refuse("index off by one", bad, all[event_at].clone(), None, None);
    }
    // The size line off by one (the signature no longer holds).
    for size in ["19", "21"] {
        let bad = proof.replacen("\n20\n", &format!("\n{size}\n"), 1);
        assert_ne!(bad, proof);
        refuse("size off by one", bad, event.clone(), None, None);
    }
    // A wrong origin: a head of another run signed with the same key.
    let other = Run::running(&["runtime"]);
    let other_sign = sign_head(&other, &keys).assert_ok();
    let other_proof = other
        .raw(&["prove-event", "--run-id", &other.run_id, "--sequence", "1"])
        .assert_ok()["proof"]
        .as_str()
        .unwrap()
        .to_string();
    let other_event = std::fs::read_to_string(other.dir.join("receipt.jsonl"))
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    check_inclusion(
        &run,
        other_proof.as_bytes(),
        other_event.as_bytes(),
        &[vkey],
        &[],
    )
    .assert_ok();
    refuse(
        "wrong origin",
        other_proof.clone(),
        other_event.clone(),
        None,
        Some(format!("bluetape-flow/{}", run.run_id)),
    );
    // Signed only by an unknown key (same name, another key).
    let stranger_note = sign_head(&run, &stranger).assert_ok()["note"]
        .as_str()
        .unwrap()
        .to_string();
    let split = proof.find("\n\n").unwrap();
    let by_stranger = format!("{}\n\n{}", &proof[..split], stranger_note);
    check_inclusion(
        &run,
        by_stranger.as_bytes(),
        event.as_bytes(),
        &[&stranger.verifier],
        &[],
    )
    .assert_ok();
    refuse("unknown key only", by_stranger, event.clone(), None, None);
    // Unsigned: the checkpoint text alone, and with an empty signature block.
    let text_end = new_note.find("\n\n").unwrap() + 1;
    let unsigned = format!("{}\n\n{}", &proof[..split], &new_note[..text_end]);
    refuse("unsigned note", unsigned, event.clone(), None, None);
    let unsigned = format!("{}\n\n{}\n", &proof[..split], &new_note[..text_end]);
    refuse("unsigned note", unsigned, event.clone(), None, None);
    // A key that verifies nothing here.
    refuse(
        "unknown key",
        proof.clone(),
        event.clone(),
        Some(vec![stranger.vkey.clone()]),
        None,
    );

    // Consistency: sizes off by one, heads swapped, another run's head,
    // a stranger's head, an unsigned head.
    let mut consistency = |why: &str, proof: Value| {
        refused_proof(check_append(
            &run,
            &canonical(&proof),
            &[vkey],
            &["--run-id", &run.run_id],
        ));
        refuse_consistency.push({
            let mut p = proof;
            p["why"] = json!(why);
            p
        });
    };
    for (key, delta) in [
        ("old_size", 1i64),
        ("old_size", -1),
        ("new_size", 1),
        ("new_size", -1),
    ] {
        let mut bad = append.clone();
        bad[key] = json!(bad[key].as_i64().unwrap() + delta);
        consistency("size off by one", bad);
    }
    let mut swapped = append.clone();
    swapped["old_note"] = append["new_note"].clone();
    swapped["new_note"] = append["old_note"].clone();
    swapped["old_size"] = append["new_size"].clone();
    swapped["new_size"] = append["old_size"].clone();
    consistency("heads swapped", swapped);
    let mut foreign = append.clone();
    foreign["new_note"] = other_sign["note"].clone();
    consistency("another run's head", foreign);
    let mut stranger_head = append.clone();
    stranger_head["new_note"] = json!(stranger_note);
    consistency("unknown key only", stranger_head);
    let mut unsigned = append.clone();
    unsigned["old_note"] = json!(&old_note[..old_note.find("\n\n").unwrap() + 1]);
    consistency("unsigned note", unsigned);
    let mut dropped = append.clone();
    dropped["hashes"].as_array_mut().unwrap().pop();
    consistency("a hash missing", dropped);

    let unsigned_note = new_note[..new_note.find("\n\n").unwrap() + 1].to_string();
    let result = go_check(
        run.tmp.path(),
        &json!({
            "origin": format!("bluetape-flow/{}", run.run_id), "vkeys": [keys.vkey],
            "receipt": s(&run.dir.join("receipt.jsonl")), "tree_hashes": "",
            "heads": [old_note, new_note],
            "inclusion": [{"proof": proof, "event": event}],
            "consistency": [append],
            "refuse_inclusion": refuse_inclusion,
            "refuse_consistency": refuse_consistency,
            "refuse_notes": [unsigned_note, stranger_note, other_sign["note"]],
        }),
    );
    assert_eq!(result["heads_ok"], 2);
    assert_eq!(result["inclusion_ok"], 1);
    assert_eq!(result["consistency_ok"], 1);
    assert_eq!(result["refused"], 11 + 9 + 3, "{result}");
}

/// Reference-written runs: the receipt stays byte-identical, the first
/// sign-head builds the tree, every event is proven, and Go agrees with
/// the heads, the tree and the proofs. A damaged fixture is never signed.
#[test]
fn reference_runs_get_their_tree_on_first_use_and_go_agrees() {
    let mut signed = 0;
    let mut refused = 0;
    for scenario in common::scenarios() {
        let tmp = tempfile::tempdir().unwrap();
        let flow = common::Flow::new(tmp.path());
        let root = tmp.path().join("state");
        common::prepare_state(&scenario, &root);
        let expected: Value =
            serde_json::from_str(&std::fs::read_to_string(scenario.join("expected.json")).unwrap())
                .unwrap();
        let Some(run_id) = expected["run_id"].as_str().map(str::to_string).or_else(|| {
            std::fs::read_dir(root.join("runs"))
                .ok()?
                .flatten()
                .next()
                .map(|e| e.file_name().to_string_lossy().into_owned())
        }) else {
            continue;
        };
        let dir = root.join("runs").join(&run_id);
        if !dir.join("receipt.jsonl").is_file() {
            continue;
        }
        let cli = |args: &[&str]| {
            let mut argv = vec!["--state-root", root.to_str().unwrap()];
            argv.extend_from_slice(args);
            flow.run(&argv)
        };
        let receipt = std::fs::read(dir.join("receipt.jsonl")).unwrap();
        let verify = cli(&["verify", "--run-id", &run_id]);
        let key = tmp.path().join("k.key");
        let vkey = cli(&[
            "key-generate",
            "--name",
            "auditor.example",
            "--out",
            s(&key),
        ])
        .assert_ok()["verifier_key"]
            .as_str()
            .unwrap()
            .to_string();
        let sign = cli(&["sign-head", "--run-id", &run_id, "--key", s(&key)]);
        if verify.code != 0 {
            // Never signs what does not verify; writes no head.
            assert_eq!(sign.code, 3, "{}: {sign:?}", scenario.display());
            assert!(!dir.join("heads").exists());
            refused += 1;
            continue;
        }
        let sign = sign.assert_ok();
        signed += 1;
        assert_eq!(
            std::fs::read(dir.join("receipt.jsonl")).unwrap(),
            receipt,
            "{}",
            scenario.display()
        );
        let all: Vec<String> = String::from_utf8(receipt.clone())
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        assert_eq!(sign["size"], all.len());
        assert_eq!(
            std::fs::read(dir.join("tree-hashes")).unwrap(),
            expected_tree(&all)
        );
        // verify with a head: more keys; the reference's keys unchanged.
        let with_head = cli(&["verify", "--run-id", &run_id]).assert_ok();
        let plain = verify.json();
        for (k, v) in plain.as_object().unwrap() {
            assert_eq!(&with_head[k], v, "{k}");
        }
        assert_eq!(with_head["heads_checked"], 1);
        // A tree without heads leaves verify's output byte for byte.
        std::fs::remove_dir_all(dir.join("heads")).unwrap();
        assert_eq!(cli(&["verify", "--run-id", &run_id]).stdout, verify.stdout);
        let note =
            cli(&["sign-head", "--run-id", &run_id, "--key", s(&key)]).assert_ok()["note"].clone();
        let mut inclusion = Vec::new();
        for sequence in 1..=all.len() {
            let out = cli(&[
                "prove-event",
                "--run-id",
                &run_id,
                "--sequence",
                &sequence.to_string(),
            ])
            .assert_ok();
            assert_eq!(out["event"], all[sequence - 1]);
            inclusion.push(json!({"proof": out["proof"], "event": all[sequence - 1]}));
        }
        let result = go_check(
            tmp.path(),
            &json!({
                "origin": format!("bluetape-flow/{run_id}"), "vkeys": [vkey],
                "receipt": s(&dir.join("receipt.jsonl")), "tree_hashes": s(&dir.join("tree-hashes")),
                "heads": [note], "inclusion": inclusion,
            }),
        );
        assert_eq!(result["inclusion_ok"], all.len());
        assert_eq!(result["tree_hashes_equal"], true);
    }
    assert!(signed >= 10, "signed {signed} fixtures");
    assert!(refused >= 1, "no damaged fixture was tried");
}

/// A cut tail is caught by anyone who kept a head, even after
/// receipt-head.json (and the stored heads) were deleted; a rewritten tail
/// of the same length too.
#[test]
fn a_cut_tail_is_caught_by_a_kept_head_even_without_receipt_head_json() {
    let (run, keys) = grown_with_keys("auditor", 12);
    let kept = write(
        &run,
        "kept.note",
        sign(&run, &keys)["note"].as_str().unwrap().as_bytes(),
    );
    let receipt = run.dir.join("receipt.jsonl");
    let all = lines(&run);
    verify_with_key_and(&run, &keys, &["--head", s(&kept)]);
    // Cut the tail: the stored head alone catches it.
    let cut: String = all[..9].iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&receipt, &cut).unwrap();
    std::fs::remove_file(run.dir.join("receipt-head.json")).unwrap();
    let e = run
        .raw(&["verify", "--run-id", &run.run_id])
        .assert_error(3, "receipt_corrupt");
    assert!(
        e["message"].as_str().unwrap().contains("no longer extends"),
        "{e}"
    );
    // Delete the stored heads and the checkpoint too: the receipt looks
    // whole to plain verify, but not to a kept head.
    std::fs::remove_dir_all(run.dir.join("heads")).unwrap();
    let _ = std::fs::remove_file(run.dir.join("checkpoint.json"));
    assert_eq!(run.verify()["sequence"], 9);
    let e = verify_keyed(&run, &keys, &["--head", s(&kept)]).assert_error(3, "receipt_corrupt");
    assert!(
        crate::bed::str_field(&e, "message").contains("it is for 12 events and the receipt has 9"),
        "{e}"
    );
    // Regrow to 12 with other events: same length, another tree.
    grow(&run, 12, |_| {});
    assert_ne!(lines(&run), all);
    let e = verify_keyed(&run, &keys, &["--head", s(&kept)]).assert_error(3, "receipt_corrupt");
    assert!(
        e["message"].as_str().unwrap().contains("another root"),
        "{e}"
    );
    // A proof against the kept head is refused too, and so is signing over
    // a stored head the receipt no longer extends.
    run.read("prove-event", &["--sequence", "1", "--head", s(&kept)])
        .assert_error(3, "receipt_corrupt");
    std::fs::create_dir_all(run.dir.join("heads")).unwrap();
    std::fs::set_permissions(
        run.dir.join("heads"),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    let stored = run.dir.join(format!("heads/12.{}.note", keys.hash));
    std::fs::copy(&kept, &stored).unwrap();
    std::fs::set_permissions(&stored, std::fs::Permissions::from_mode(0o600)).unwrap();
    let e = sign_head(&run, &keys).assert_error(3, "receipt_corrupt");
    assert!(
        e["message"].as_str().unwrap().contains("another root"),
        "{e}"
    );
    // --head needs --key.
    run.read("verify", &["--head", s(&kept)])
        .assert_error(2, "contract_error");
}

/// The signer key file: 0600, never over a file or through a symlink,
/// never printed; a key that is not 0600, not a regular file or malformed
/// is refused (exit 2) before anything is signed.
#[test]
fn signer_keys_are_guarded() {
    let run = lane_run();
    let keys = keygen(&run, "ops.example/key");
    assert_eq!(mode(&keys.signer), 0o600);
    let secret = std::fs::read_to_string(&keys.signer).unwrap();
    assert!(secret.starts_with("PRIVATE+KEY+ops.example/key+"));
    // PRIVATE+KEY+<name>+<hash>+<base64 seed>: the seed's base64 may hold
    // a '+' of its own, so it is the fifth field, not the last.
    let seed = secret.trim_end().splitn(5, '+').nth(4).unwrap().to_string();
    assert!(seed.len() > 40, "{seed}");
    // Never over an existing file, never through a symlink (dangling or not).
    let out = run.raw(&["key-generate", "--name", "x", "--out", s(&keys.signer)]);
    out.assert_error(2, "contract_error");
    assert_eq!(std::fs::read_to_string(&keys.signer).unwrap(), secret);
    let link = run.tmp.path().join("link.key");
    std::os::unix::fs::symlink(run.tmp.path().join("nowhere.key"), &link).unwrap();
    run.raw(&["key-generate", "--name", "x", "--out", s(&link)])
        .assert_error(2, "contract_error");
    assert!(!run.tmp.path().join("nowhere.key").exists());
    run.raw(&[
        "key-generate",
        "--name",
        "bad name",
        "--out",
        s(&run.tmp.path().join("n.key")),
    ])
    .assert_error(2, "contract_error");
    assert!(!run.tmp.path().join("n.key").exists());

    let sign_with = |path: &Path| run.read("sign-head", &["--key", s(path)]);
    let message = |out: &Output| out.error()["message"].as_str().unwrap().to_string();
    let loose = write(&run, "loose.key", secret.as_bytes());
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
    // A loose mode is named as one, and the refusal says how to fix it.
    let refused = sign_with(&loose).error();
    assert!(
        refused["hint"]
            .as_str()
            .is_some_and(|h| h.contains("chmod 600")),
        "{refused}"
    );
    let symlink = run.tmp.path().join("sym.key");
    std::os::unix::fs::symlink(&keys.signer, &symlink).unwrap();
    let directory = run.tmp.path().join("dir.key");
    std::fs::create_dir(&directory).unwrap();
    let mut cases = vec![loose, symlink, directory, keys.verifier.clone()];
    for bad in [
        secret.replacen("PRIVATE+KEY", "PRIVATE+KEX", 1),
        secret.replacen(&keys.hash, "00000000", 1),
        secret.replacen(&keys.hash, &keys.hash.to_uppercase(), 1),
        secret.replacen(&seed, &seed[1..], 1),
        format!("{secret}{secret}"),
        String::new(),
        "\u{ff}".into(),
    ] {
        if bad == secret {
            continue; // an all-digit key hash has no upper case
        }
        let path = write(&run, "bad.key", bad.as_bytes());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        cases.push(path);
    }
    for case in cases {
        let before = common::snapshot(&run.root);
        let out = sign_with(&case);
        out.assert_error(2, "contract_error");
        assert_eq!(before, common::snapshot(&run.root), "{}", case.display());
        assert!(message(&out).contains("key"), "{out:?}");
        let text = out.stderr.clone();
        assert!(!text.contains(&seed), "the key leaked: {text}");
        assert!(!run.dir.join("heads").exists());
    }
    // The key never reaches stdout or stderr, the state root or the heads.
    let out = sign_head(&run, &keys);
    assert!(!out.stdout.contains(&seed) && !out.stderr.contains(&seed));
    for entry in common::walk(&run.root) {
        if entry.is_file() {
            let bytes = std::fs::read(&entry).unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains(&seed),
                "{}",
                entry.display()
            );
        }
    }
}

/// A receipt that does not verify is never signed (exit 3, nothing
/// written), whether the checkpoint holds or not.
#[test]
fn sign_head_never_signs_a_receipt_that_does_not_verify() {
    let (run, keys) = grown_with_keys("log", 10);
    let receipt = run.dir.join("receipt.jsonl");
    let mut bytes = std::fs::read(&receipt).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    std::fs::write(&receipt, &bytes).unwrap();
    let before = common::snapshot(&run.root);
    sign_head(&run, &keys).assert_error(3, "receipt_corrupt");
    assert_eq!(before, common::snapshot(&run.root));
    assert!(!run.dir.join("heads").exists());
}

/// The stored tree follows every append, is rebuilt by the next writer
/// when missing, short or not matching, and read-only commands never
/// write it.
#[test]
fn the_stored_tree_follows_appends_and_is_rebuilt_when_it_does_not_match() {
    let run = lane_run();
    let keys = keygen(&run, "log");
    let tree = run.dir.join("tree-hashes");
    grow(&run, 9, |n| {
        assert_eq!(
            std::fs::read(&tree).unwrap(),
            expected_tree(&lines(&run)),
            "after {n}"
        );
    });
    // Missing: a read-only proof computes it in memory and writes nothing.
    sign(&run, &keys);
    std::fs::remove_file(&tree).unwrap();
    let before = common::snapshot(&run.root);
    prove_event(&run, 3, None);
    assert_eq!(before, common::snapshot(&run.root));
    // The next append rebuilds it.
    grow(&run, 10, |_| {});
    assert_eq!(std::fs::read(&tree).unwrap(), expected_tree(&lines(&run)));
    // A flipped last leaf, a short file, an extra byte: rebuilt.
    for damage in 0..3 {
        let mut bytes = std::fs::read(&tree).unwrap();
        match damage {
            0 => {
                let at = bytes.len() - 40;
                bytes[at] ^= 1;
            }
            1 => bytes.truncate(bytes.len() - 32),
            _ => bytes.push(0),
        }
        std::fs::write(&tree, &bytes).unwrap();
        let n = lines(&run).len() + 1;
        grow(&run, n, |_| {});
        assert_eq!(
            std::fs::read(&tree).unwrap(),
            expected_tree(&lines(&run)),
            "damage {damage}"
        );
    }
    // sign-head (a writer under the lock) rebuilds it too.
    std::fs::remove_file(&tree).unwrap();
    sign(&run, &keys);
    assert_eq!(std::fs::read(&tree).unwrap(), expected_tree(&lines(&run)));
    // Another writer's lines (hand-sealed, as the Python tool would): the
    // tree no longer matches and is rebuilt by the next signer.
    run.append_sealed(&[(
        "topology_component_removed",
        json!({"reason": "scope cut", "metadata": {"owner_epoch": 1, "component_id": "runtime"}}),
    )]);
    run.verify();
    let out = sign(&run, &keys);
    assert_eq!(out["size"], lines(&run).len());
    assert_eq!(std::fs::read(&tree).unwrap(), expected_tree(&lines(&run)));
}

/// The gates that close a phase sign the head they leave; a bad key is
/// refused before the gate writes anything.
#[test]
fn gates_sign_the_head_they_leave() {
    // complete
    let run = Run::running(&["runtime"]);
    let keys = keygen(&run, "gate.example");
    run.built_runtime();
    run.check("runtime", "unit", true, None, &ev("unit tests passed"))
        .assert_ok();
    run.cover("runtime", &ev("runtime verified")).assert_ok();
    let loose = write(&run, "loose.key", &std::fs::read(&keys.signer).unwrap());
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o640)).unwrap();
    let before = common::snapshot(&run.root);
    run.cmd(
        "complete",
        &ev("main verified"),
        &["--sign-head-key", s(&loose)],
    )
    .assert_error(2, "contract_error");
    assert_eq!(before, common::snapshot(&run.root));
    let out = run
        .cmd(
            "complete",
            &ev("main verified"),
            &["--sign-head-key", s(&keys.signer)],
        )
        .assert_ok();
    assert_eq!(out["run_state"], "completed");
    let head = &out["signed_head"];
    assert_eq!(head["size"], out["sequence"]);
    assert_eq!(head["chain_checksum"], out["checksum"]);
    assert!(run.root.join(head["path"].as_str().unwrap()).is_file());
    verify_with_key(&run, &keys);

    // handoff-create, then resume
    let run = lane_run();
    let keys = keygen(&run, "gate.example");
    let events = run.events();
    let last = events.last().unwrap();
    let report = run.file(&json!({
        "canonical_sha": "a".repeat(64), "agents_hash": "b".repeat(64),
        "skill_hash": "c".repeat(64), "manifest_hash": last["manifest_hash"],
        "run_id": run.run_id, "owner_epoch": 1,
        "receipt_head": last["checksum"], "target_hashes": {"src/lib.rs": "d".repeat(64)},
    }));
    let owner = run.owner();
    let out = run.read(
        "handoff-create",
        &[
            "--owner-file",
            s(&owner),
            "--input",
            &report,
            "--sign-head-key",
            s(&keys.signer),
        ],
    );
    let out = out.assert_ok();
    assert_eq!(out["signed_head"]["size"], out["sequence"], "{out}");
    let new_owner = run.root.join("handles/next.owner");
    let evidence = run.file(&ev("resumed in a fresh session"));
    let out = run
        .read(
            "resume",
            &[
                "--owner-file",
                s(&owner),
                "--evidence",
                &evidence,
                "--new-owner-file",
                s(&new_owner),
                "--sign-head-key",
                s(&keys.signer),
            ],
        )
        .assert_ok();
    assert_eq!(out["signed_head"]["size"], out["sequence"], "{out}");
    assert_eq!(
        run.raw(&[
            "verify",
            "--run-id",
            &run.run_id,
            "--key",
            s(&keys.verifier)
        ])
        .assert_ok()["heads_checked"],
        2
    );

    // recovery-run-create: the new run's head
    let receipt = run.dir.join("receipt.jsonl");
    let mut bytes = std::fs::read(&receipt).unwrap();
    let at = bytes.len() - 20;
    bytes[at] ^= 1;
    std::fs::write(&receipt, &bytes).unwrap();
    let diagnosis = run.read("receipt-diagnose", &[]);
    assert_eq!(diagnosis.code, 0, "{diagnosis:?}");
    let diagnosis_file = write(&run, "diagnosis.json", diagnosis.stdout.as_bytes());
    let approval = run.file(&json!([{"kind": "user_approval", "summary": "recover"}]));
    let out = run
        .read(
            "recovery-run-create",
            &[
                "--input",
                s(&diagnosis_file),
                "--owner-file",
                s(&run.root.join("handles/recovery.owner")),
                "--evidence",
                &approval,
                "--sign-head-key",
                s(&keys.signer),
            ],
        )
        .assert_ok();
    let new_run = out["new_run_id"].as_str().unwrap();
    assert_eq!(out["signed_head"]["run_id"], new_run, "{out}");
    assert!(
        out["signed_head"]["note"]
            .as_str()
            .unwrap()
            .starts_with(&format!("bluetape-flow/{new_run}\n"))
    );
}

/// Hostile or truncated notes, proofs and keys get a typed error, never a
/// panic or an exit status outside the table.
#[test]
fn hostile_notes_and_proofs_get_typed_errors() {
    let (run, keys) = grown_with_keys("log", 9);
    let note = sign(&run, &keys)["note"].as_str().unwrap().to_string();
    let proof = prove_event(&run, 2, None)["proof"]
        .as_str()
        .unwrap()
        .to_string();
    let event = lines(&run)[1].clone();
    let head_file = write(&run, "h.note", note.as_bytes());
    let append = canonical(&prove_append(&run, &head_file, None)["proof"]);
    let typed = |out: &Output| {
        assert!(matches!(out.code, 2 | 3), "{out:?}");
        assert!(out.stdout.is_empty(), "{out:?}");
        let e = out.error();
        assert_eq!(e["ok"], false);
    };
    for cut in (0..proof.len()).step_by(5) {
        typed(&check_inclusion(
            &run,
            &proof.as_bytes()[..cut],
            event.as_bytes(),
            &[&keys.verifier],
            &[],
        ));
    }
    for cut in (0..note.len()).step_by(7) {
        let file = write(&run, "cut.note", &note.as_bytes()[..cut]);
        typed(&verify_keyed(&run, &keys, &["--head", s(&file)]));
    }
    for cut in (0..append.len()).step_by(11) {
        typed(&check_append(&run, &append[..cut], &[&keys.verifier], &[]));
    }
    let garbage: Vec<Vec<u8>> = vec![
        vec![],
        vec![0xff; 100],
        b"c2sp.org/tlog-proof@v1\nindex 99999999999999999999\n\nx\n".to_vec(),
        b"c2sp.org/tlog-proof@v1\nindex 18446744073709551615\n\n".to_vec(),
        format!("c2sp.org/tlog-proof@v1\nindex 1\n{}\n\n{note}", "AAAA".repeat(11)).into_bytes(),
        format!("c2sp.org/tlog-proof@v1\nindex 1\n{}\n\n{note}", vec!["47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="; 70].join("\n")).into_bytes(),
        vec![b'a'; 70_000],
        b"{\"hashes\": 5}".to_vec(),
        b"[]".to_vec(),
        format!("{{\"old_note\": {0:?}, \"new_note\": {0:?}, \"old_size\": 0, \"new_size\": 18446744073709551615, \"hashes\": []}}", note).into_bytes(),
    ];
    for bytes in &garbage {
        typed(&check_inclusion(
            &run,
            bytes,
            event.as_bytes(),
            &[&keys.verifier],
            &[],
        ));
        typed(&check_append(&run, bytes, &[&keys.verifier], &[]));
        let file = write(&run, "g.note", bytes);
        typed(&verify_keyed(&run, &keys, &["--head", s(&file)]));
        typed(&check_inclusion(
            &run,
            proof.as_bytes(),
            bytes,
            &[&keys.verifier],
            &[],
        ));
        typed(&run.flow.run(&[
            "check-proof",
            "--proof",
            s(&write(&run, "p", proof.as_bytes())),
            "--event",
            s(&write(&run, "e", event.as_bytes())),
            "--key",
            s(&file),
        ]));
    }
    // Neither proof kind nor a key: usage errors.
    run.flow
        .run(&["check-proof", "--key", s(&keys.verifier)])
        .assert_error(2, "contract_error");
    run.flow
        .run(&["check-proof", "--append", s(&head_file)])
        .assert_error(2, "contract_error");
    // A sequence outside the head.
    for sequence in ["0", "10", "99999999999999999999"] {
        typed(&run.read("prove-event", &["--sequence", sequence]));
    }
    // No stored head yet on a new run.
    let fresh = Run::running(&["runtime"]);
    fresh
        .raw(&["prove-event", "--run-id", &fresh.run_id, "--sequence", "1"])
        .assert_error(2, "contract_error");
    // --out never replaces a file.
    let out_file = write(&run, "exists.proof", b"keep");
    run.read("prove-event", &["--sequence", "1", "--out", s(&out_file)])
        .assert_error(2, "contract_error");
    assert_eq!(std::fs::read(&out_file).unwrap(), b"keep");
    let fresh_out = run.tmp.path().join("new.proof");
    let printed = run
        .read("prove-event", &["--sequence", "1", "--out", s(&fresh_out)])
        .assert_ok();
    assert_eq!(
        std::fs::read_to_string(&fresh_out).unwrap(),
        printed["proof"].as_str().unwrap()
    );
    assert_eq!(mode(&fresh_out), 0o600);
}

/// Without stored heads and without the new flags, `verify` prints exactly
/// the keys it always did.
#[test]
fn verify_output_is_unchanged_without_heads() {
    let run = lane_run();
    let out = run.verify();
    crate::bed::assert_keys(
        &out,
        "checksum event_count ok operation run_id sequence state_root",
        "verify",
    );
    assert!(run.dir.join("tree-hashes").is_file());
}

/// `sign-head` signs the root of the receipt's own lines: a stored tree
/// whose earlier hashes were changed without the key (its last leaf kept,
/// so it still looks current) is never signed, and `verify --key` accepts
/// the head it signed.
#[test]
fn sign_head_never_signs_a_root_the_stored_tree_made_up() {
    use base64::Engine as _;
    let (run, keys) = grown_with_keys("auditor", 7);
    let tree = run.dir.join("tree-hashes");
    let honest = std::fs::read(&tree).unwrap();
    assert_eq!(honest, expected_tree(&lines(&run)));
    let mut forged = honest.clone();
    forged[0] ^= 1; // the first leaf, not the last
    std::fs::write(&tree, &forged).unwrap();
    let signed = sign(&run, &keys);
    let mut receipt_tree = bluetape_flow::receipt::merkle::RootAccumulator::default();
    for line in lines(&run) {
        receipt_tree.push_line(line.as_bytes());
    }
    let root = base64::engine::general_purpose::STANDARD.encode(receipt_tree.root().0);
    assert_eq!(signed["root_hash"], root.as_str(), "{signed}");
    verify_with_key(&run, &keys);
}
