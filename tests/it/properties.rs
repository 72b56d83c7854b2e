//! Property tests of canonical JSON (contracts/receipt.md "Canonical JSON"):
//! it is a fixed point (and equals Python's json.dumps). That any
//! single-byte change to a receipt is detected is proved once, in
//! `reliability::damage`.

use bluetape_flow::receipt::canonical;
use proptest::prelude::*;
use serde_json::{Map, Value};

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        // Integers far beyond 64 bits must survive exactly.
        "-?[1-9][0-9]{18,40}".prop_map(|s| serde_json::from_str(&s).unwrap()),
        any::<String>().prop_map(Value::String),
        "[\\x00-\\x1f\\x7f\"\\\\/\u{2028}é✓😀a-z]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

proptest! {
    #[test]
    fn canonical_is_a_fixed_point(value in json_value()) {
        let once = canonical::to_vec(&value);
        let reparsed: Value = serde_json::from_slice(&once).unwrap();
        prop_assert_eq!(canonical::to_vec(&reparsed), once);
    }
}

#[test]
fn canonical_equals_python_json_dumps() {
    // Python's stdlib json (not reference code) is the definition of the
    // format; python3 is part of every machine this project runs on.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ),
    );
    let values: Vec<Value> = (0..300)
        .map(|_| json_value().new_tree(&mut runner).unwrap().current())
        .collect();
    let input: String = values
        .iter()
        .map(|v| canonical::to_string(v) + "\n")
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("values.jsonl");
    std::fs::write(&path, &input).unwrap();
    let script = "import json,sys\nfor line in open(sys.argv[1], encoding='utf-8'):\n    sys.stdout.write(json.dumps(json.loads(line), ensure_ascii=False, sort_keys=True, separators=(',', ':')) + '\\n')\n";
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&path)
        .output()
        .expect("python3 must be installed");
    crate::bed::assert_ran(&out, "python3");
    let python = String::from_utf8(out.stdout).unwrap();
    for (ours, theirs) in input.lines().zip(python.lines()) {
        assert_eq!(ours, theirs);
    }
    assert_eq!(input.lines().count(), python.lines().count());
}
