//! Scopes only narrow (contracts/approvals.md, "Authority on every path"):
//! a child lane created with `parent_lane_id` naming an existing lane must
//! stay within that lane's write scope — the same rule (one function,
//! `receipt::scope::narrow_scope`) that bounds a replacement's scope in
//! `lane-reassign`. The reference lets a child widen its parent's scope.

use crate::bed as common;

use common::{Output, TestBed, bed_type, snapshot};
use serde_json::{Value, json};

bed_type!(Run);

fn running() -> Run {
    let bed = TestBed::planned(&["runtime"]);
    std::fs::create_dir_all(bed.repo.join("src")).unwrap();
    std::fs::create_dir_all(bed.repo.join("lib")).unwrap();
    let run = Run(bed);
    run.step("run-approve", &[]).assert_ok();
    run.step("run-start", &[]).assert_ok();
    run
}

impl Run {
    fn create(&self, lane_id: &str, parent: Option<&str>, scope: Value) -> Output {
        let input = json!({
            "lane_id": lane_id, "agent_id": "agent-1", "assignment": "work",
            "write_scope": scope, "fallback": "main session",
            "observed_at": "2026-07-14T01:00:00Z",
            "startup_ack_deadline": "2026-07-14T01:00:30Z",
            "command_deadline": "2026-07-14T01:10:00Z",
            "parent_lane_id": parent,
        });
        let path = self.tmp.path().join(format!("{lane_id}.json"));
        std::fs::write(&path, input.to_string()).unwrap();
        self.step("lane-create", &["--input", path.to_str().unwrap()])
    }
}

#[test]
fn a_child_lane_cannot_widen_its_parents_scope() {
    let run = running();
    run.create("build", None, json!(["src"])).assert_ok();
    let before = snapshot(&run.root);
    for scope in [json!(["lib"]), json!(["src", "lib/x"]), json!(["."])] {
        let e = run
            .create("fix", Some("build"), scope.clone())
            .assert_error(2, "contract_error");
        assert_eq!(
            e["message"], "child lane write scope must be equal to or narrower than its parent's",
            "{scope}"
        );
        assert_eq!(before, snapshot(&run.root), "{scope} changed the state");
    }
    // Equal or narrower is fine, and so is a parent id that names no lane
    // (the reference does not require the parent to exist).
    run.create("fix", Some("build"), json!(["src/parser", "src/"]))
        .assert_ok();
    run.create("other", Some("ghost"), json!(["lib"]))
        .assert_ok();
    // A child of a lane with an empty scope can only be read-only too.
    run.create("review", None, json!([])).assert_ok();
    let e = run
        .create("rereview", Some("review"), json!(["src"]))
        .assert_error(2, "contract_error");
    assert_eq!(
        e["message"],
        "child lane write scope must be equal to or narrower than its parent's"
    );
    run.create("rereview", Some("review"), json!([]))
        .assert_ok();
}
