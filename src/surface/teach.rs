//! Hints of the failure envelope (contracts/refusals.md): the fix a refusal
//! teaches, with the caller's own flag values filled in, and the default hint
//! of each error class that has one.

use serde_json::Value;
use std::ffi::OsString;

use crate::commands::ErrorKind;
use crate::commands::error::{INSECURE_HINT, LOCK_HELD_HINT};
use crate::coordinator::approval::ApprovalRefusal;
use crate::coordinator::views::quote;
use crate::store::StoreError;
use crate::store::input::{InputSource, JsonArg};

/// Placeholders a hint may hold, each filled from the flag of that name.
const PLACEHOLDERS: [(&str, &str); 4] = [
    ("{run_id}", "--run-id"),
    ("{owner_file}", "--owner-file"),
    ("{lane_id}", "--lane-id"),
    ("{agent_id}", "--agent-id"),
];

/// What the caller gave the command, as a refusal reads it to fill a
/// hint's placeholders and name a JSON input: a command line, or the
/// arguments of a tool call (snake-case names, JSON inputs as values, and
/// what the MCP server adds itself, such as `owner_file`).
#[derive(Clone, Copy)]
pub enum Given<'a> {
    Argv(&'a [OsString]),
    Arguments(&'a serde_json::Map<String, Value>),
}

impl Given<'_> {
    /// Nothing given (a refusal before any command was parsed).
    pub const NOTHING: Given<'static> = Given::Argv(&[]);

    /// The value of `--flag` as text (`--flag V` or `--flag=V` on a command
    /// line, the last wins as clap's `args_override_self` does; a string
    /// or a number among the arguments).
    fn text(self, flag: &str) -> Option<String> {
        match self {
            Given::Argv(argv) => {
                let mut found = None;
                let mut items = argv.iter().map(|a| a.to_string_lossy());
                while let Some(item) = items.next() {
                    if item == flag {
                        found = items.next().map(|v| v.into_owned());
                    } else if let Some(value) =
                        item.strip_prefix(flag).and_then(|r| r.strip_prefix('='))
                    {
                        found = Some(value.to_string());
                    }
                }
                found
            }
            Given::Arguments(arguments) => match arguments.get(&argument_name(flag))? {
                Value::String(text) => Some(text.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            },
        }
    }

    /// The JSON option `flag` as it was given.
    fn json(self, flag: &str) -> Option<JsonArg> {
        match self {
            Given::Argv(_) => self.text(flag).map(|text| JsonArg::Given(text.into())),
            Given::Arguments(arguments) => match arguments.get(&argument_name(flag))? {
                Value::String(text) => Some(JsonArg::Given(text.into())),
                value => Some(JsonArg::Value(value.clone())),
            },
        }
    }
}

/// A flag's name as a tool argument: `--lane-id` is `lane_id`.
fn argument_name(flag: &str) -> String {
    flag.trim_start_matches('-').replace('-', "_")
}

/// `hint` with each placeholder replaced by the caller's flag value, or by
/// `<run_id>`-style text where the command had no such flag.
pub fn fill(hint: &str, given: Given) -> String {
    let mut out = hint.to_string();
    for (placeholder, flag) in PLACEHOLDERS {
        if out.contains(placeholder) {
            let value = given
                .text(flag)
                .map(|v| quote(&v))
                .unwrap_or_else(|| format!("<{}>", &placeholder[1..placeholder.len() - 1]));
            out = out.replace(placeholder, &value);
        }
    }
    out
}

/// The flags whose value is a JSON input (inline, `-` or a file).
pub const FILE_FLAGS: [&str; 5] = [
    "--input",
    "--evidence",
    "--decision",
    "--changed-paths",
    "--approval-policy",
];

/// A refusal about a JSON input names where the input came from:
/// `fields.file` (or `fields.source`, for a value given inline, piped or
/// received as such) from what the caller gave, and (`in_message`: for
/// input errors, exit 2) the message says it. The input reader's own
/// refusals (`store::input`) name their input in both already, and are
/// known by their `fields`: nothing here reads the message.
pub fn name_the_file(
    message: &mut String,
    fields: Option<&mut Value>,
    given: Given,
    in_message: bool,
) {
    let Some(Value::Object(fields)) = fields else {
        return;
    };
    let Some(flag) = fields
        .get("input")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return;
    };
    let named_already = fields.contains_key("file") || fields.contains_key("source");
    if !FILE_FLAGS.contains(&flag.as_str()) || named_already {
        return;
    }
    let Some(arg) = given.json(&flag) else {
        return;
    };
    let source = arg.source();
    let said = match source {
        InputSource::File(path) => {
            let file = path.to_string_lossy().into_owned();
            fields.insert("file".into(), Value::String(file.clone()));
            format!("{flag} '{file}'")
        }
        // An inline, piped or received value is no file: say where it was.
        InputSource::Inline(_) | InputSource::Argument(_) | InputSource::Stdin => {
            let kind = if source == InputSource::Stdin {
                "stdin"
            } else {
                "inline"
            };
            fields.insert("source".into(), Value::String(kind.into()));
            let named = source.label(&flag);
            match named.strip_prefix("the ") {
                Some(_) => named,
                None => format!("the {named}"),
            }
        }
    };
    if in_message {
        message.push_str(&format!(" (in {said})"));
    }
}

/// The hint of an error class when the refusal brings none of its own.
pub fn default_hint(error: &ErrorKind) -> Option<String> {
    let text = match error {
        ErrorKind::ReceiptCorrupt(_) | ErrorKind::ReceiptDamaged(_) => {
            "find where trust ends: bluetape-flow receipt-diagnose --run-id {run_id}; a damaged run goes on in a new one made by recovery-run-create"
        }
        ErrorKind::ProofInvalid(_) => {
            "the proof, the event and the keys given do not belong together (this is no state-root damage): make the proof again where the run lives, bluetape-flow prove-event --run-id {run_id} --sequence N --out proof.txt (prove-append --from HEAD for an append), against a head signed by the key you check with (bluetape-flow verify --run-id {run_id} --key VKEY says which keys sign its heads)"
        }
        ErrorKind::CompletionBlocked { .. } => {
            "see what completion still needs: bluetape-flow completion-check --run-id {run_id}"
        }
        ErrorKind::Unsupported(_) => {
            "this run uses manifest 1.0 (Phase 1); Phase 2 commands need a run made by this tool's init"
        }
        ErrorKind::Approval(ApprovalRefusal::Refused(_)) => {
            "retrying as the same identity cannot help: see who may approve with bluetape-flow approvals --run-id {run_id}"
        }
        ErrorKind::Approval(ApprovalRefusal::Expired(_)) => {
            "the approval window has passed; cancel this run (bluetape-flow run-cancel --run-id {run_id} --owner-file {owner_file} --evidence FILE) and init a new one"
        }
        ErrorKind::Store(StoreError::Insecure(_)) => INSECURE_HINT,
        ErrorKind::Store(StoreError::LockHeld(_)) => LOCK_HELD_HINT,
        ErrorKind::Approval(ApprovalRefusal::Consumed(_)) => {
            "the run is approved already; a second approval cannot be recorded: see bluetape-flow approvals --run-id {run_id}"
        }
        _ => return None,
    };
    Some(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Where a refusal's JSON input came from is said from what was given
    /// (a file, an inline value, a received value), once; a refusal of the
    /// input reader, which says it already, is left as it is.
    #[test]
    fn a_refusal_names_its_input_from_what_was_given() {
        let name = |given: Given, fields: Value| {
            let mut message = "evidence item 1 is wrong".to_string();
            let mut fields = fields;
            name_the_file(&mut message, Some(&mut fields), given, true);
            (message, fields)
        };
        let argv: Vec<OsString> = ["x", "--evidence", "ev.json"].map(OsString::from).into();
        assert_eq!(
            name(Given::Argv(&argv), json!({"input": "--evidence"})),
            (
                "evidence item 1 is wrong (in --evidence 'ev.json')".to_string(),
                json!({"input": "--evidence", "file": "ev.json"})
            )
        );
        let inline: Vec<OsString> = ["x", "--evidence=[]"].map(OsString::from).into();
        assert_eq!(
            name(Given::Argv(&inline), json!({"input": "--evidence"})).0,
            "evidence item 1 is wrong (in the --evidence value)"
        );
        let arguments = json!({"evidence": []});
        let (message, fields) = name(
            Given::Arguments(arguments.as_object().unwrap()),
            json!({"input": "--evidence"}),
        );
        assert_eq!(
            message,
            "evidence item 1 is wrong (in the evidence argument)"
        );
        assert_eq!(fields, json!({"input": "--evidence", "source": "inline"}));
        let said = json!({"input": "--evidence", "source": "stdin"});
        assert_eq!(
            name(Given::Argv(&argv), said.clone()),
            ("evidence item 1 is wrong".to_string(), said)
        );
    }

    #[test]
    fn placeholders_take_the_callers_flags_or_stay_named() {
        let argv: Vec<OsString> = ["x", "--run-id", "run-1", "--owner-file=/tmp/a b"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(
            fill(
                "--run-id {run_id} --owner-file {owner_file} --lane-id {lane_id}",
                Given::Argv(&argv)
            ),
            "--run-id run-1 --owner-file '/tmp/a b' --lane-id <lane_id>"
        );
    }
}
