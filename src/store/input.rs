//! JSON inputs (`--evidence`, `--input`, `--decision`, `--changed-paths`,
//! `--approval-policy`): a value whose first non-blank character is `[` or
//! `{` is the JSON itself, `-` is standard input (at most once per call),
//! anything else is the path of a regular non-symlink file, as in the
//! reference (contracts/commands.md "JSON inputs"). Whatever the source, at
//! most 1 MiB of UTF-8 JSON of the expected top-level type. Floats are
//! refused, and so are integers the reference could not read back (over
//! 4,300 digits). Every refusal names the flag and the file (or says the
//! value was inline or on standard input), and reads an OS error as one
//! ("evidence file 'x' does not exist"), never as Python's `[Errno N]`
//! text (DEVIATIONS 63).

use serde_json::{Value, json};
use std::ffi::OsString;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::paths::expand_tilde;
use super::root::StateRoot;
use super::secure::{open_regular_meta, read_sized};
use crate::receipt::canonical::{MAX_INTEGER_DIGITS, contains_float, contains_oversized_integer};
use crate::receipt::faults;
use nix::libc;

const MAX_INPUT_BYTES: u64 = 1_048_576;

/// The expected top-level JSON type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputShape {
    List,
    Object,
}

impl InputShape {
    fn name(self) -> &'static str {
        match self {
            InputShape::List => "list",
            InputShape::Object => "object",
        }
    }
}

/// A refused JSON input file (exit 2): the message, the input's `fields`
/// (flag, file and what is wrong) and a hint where one helps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    pub message: String,
    pub fields: Value,
    pub hint: Option<String>,
}

/// A JSON option's value as the caller gave it: the text of a command
/// line (inline JSON, `-` or a path, [`InputSource::of`]), or a JSON value
/// received as such (an MCP tool's argument, agent-tools.md §4 "Values,
/// not files"). Either is read by [`read_json_input`] under the same
/// limits.
#[derive(Clone, PartialEq)]
pub enum JsonArg {
    Given(PathBuf),
    Value(Value),
}

impl From<std::ffi::OsString> for JsonArg {
    /// The command line's text (clap's parser for every JSON option).
    fn from(text: std::ffi::OsString) -> JsonArg {
        JsonArg::Given(PathBuf::from(text))
    }
}

impl<'de> serde::Deserialize<'de> for JsonArg {
    /// A value received as JSON is the value, never a path.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<JsonArg, D::Error> {
        Value::deserialize(deserializer).map(JsonArg::Value)
    }
}

impl std::fmt::Debug for JsonArg {
    /// The JSON as text, however it came: a command line's inline value
    /// and the same value received as JSON print alike.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JsonArg::Given(text) => write!(f, "JsonArg({:?})", text.to_string_lossy()),
            JsonArg::Value(value) => write!(f, "JsonArg({:?})", value.to_string()),
        }
    }
}

impl JsonArg {
    /// Where the value comes from.
    pub fn source(&self) -> InputSource<'_> {
        match self {
            JsonArg::Given(text) => InputSource::of(text),
            JsonArg::Value(value) => InputSource::Argument(value),
        }
    }
}

/// Where a JSON option's value comes from (contracts/commands.md "JSON
/// inputs").
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum InputSource<'a> {
    /// A JSON value received as such: the tool argument named as the flag
    /// in snake case.
    Argument(&'a Value),
    /// The value is the JSON itself (its first non-blank character is `[`
    /// or `{`).
    Inline(&'a str),
    /// `-`: standard input.
    Stdin,
    /// Anything else: a file path, as in the reference.
    File(&'a Path),
}

impl<'a> InputSource<'a> {
    /// Classify a JSON option's value.
    pub fn of(value: &'a Path) -> InputSource<'a> {
        match value.to_str() {
            Some("-") => InputSource::Stdin,
            Some(text) if text.trim_start().starts_with(['[', '{']) => InputSource::Inline(text),
            _ => InputSource::File(value),
        }
    }

    /// How a message names the value: `evidence file 'x'`, `--evidence
    /// value` (inline) or `--evidence value on standard input`.
    pub fn label(&self, flag: &str) -> String {
        match self {
            InputSource::Argument(_) => format!(
                "the {} argument",
                flag.trim_start_matches('-').replace('-', "_")
            ),
            InputSource::Inline(_) => format!("{flag} value"),
            InputSource::Stdin => format!("{flag} value on standard input"),
            InputSource::File(path) => {
                format!("{} file '{}'", flag.trim_start_matches('-'), path.display())
            }
        }
    }

    /// The `fields` a refusal carries: the flag and the file, or the
    /// source (`inline`, `stdin`).
    fn fields(&self, flag: &str) -> Value {
        match self {
            InputSource::Inline(_) | InputSource::Argument(_) => {
                json!({"input": flag, "source": "inline"})
            }
            InputSource::Stdin => json!({"input": flag, "source": "stdin"}),
            InputSource::File(path) => json!({"input": flag, "file": path.display().to_string()}),
        }
    }
}

/// The sentence every JSON option's help and refusal hint shares.
pub fn takes(flag: &str, shape: InputShape) -> String {
    let example = match shape {
        InputShape::List if flag == "--evidence" => {
            "'[{\"kind\": \"plan\", \"summary\": \"...\"}]'".to_string()
        }
        InputShape::List => "'[...]'".to_string(),
        InputShape::Object => "'{...}'".to_string(),
    };
    format!(
        "{flag} takes one JSON {}: inline ({flag} {example}), - for standard input, or the path of a file holding it",
        shape.name()
    )
}

/// Read standard input for a `-` value, at most [`MAX_INPUT_BYTES`].
fn read_stdin() -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= MAX_INPUT_BYTES).then_some(bytes))
}

/// Read and parse the JSON input of `flag` (`--evidence`, `--input`, ...):
/// inline, on standard input or in a file ([`InputSource`]).
pub fn read_json_input(
    root: &StateRoot,
    given: &JsonArg,
    shape: InputShape,
    home: Option<&OsString>,
    flag: &str,
) -> Result<Value, InputError> {
    let source = given.source();
    let named = source.label(flag);
    let refuse = |message: String, hint: Option<String>| InputError {
        message,
        fields: source.fields(flag),
        hint,
    };
    let bytes = match source {
        // Held to what the same value given inline is held to: its JSON
        // text is counted, not made, and nothing is parsed again.
        InputSource::Argument(value) => {
            if json_length(value) > MAX_INPUT_BYTES {
                return Err(refuse(format!("JSON input exceeds one MiB: {named}"), None));
            }
            return checked_value(value.clone(), &source, shape, flag);
        }
        InputSource::Inline(text) => {
            if text.len() as u64 > MAX_INPUT_BYTES {
                return Err(refuse(format!("JSON input exceeds one MiB: {named}"), None));
            }
            text.as_bytes().to_vec()
        }
        InputSource::Stdin => {
            use std::io::IsTerminal;
            if std::io::stdin().is_terminal() {
                return Err(refuse(
                    format!("{named} cannot be read: standard input is a terminal"),
                    Some(format!(
                        "pipe the JSON in (echo '...' | bluetape-flow ... {flag} -) or give it inline: {}",
                        takes(flag, shape)
                    )),
                ));
            }
            read_stdin()
                .map_err(|e| refuse(format!("{named} cannot be read: {}", e.kind()), None))?
                .ok_or_else(|| refuse(format!("JSON input exceeds one MiB: {named}"), None))?
        }
        InputSource::File(shown_path) => {
            let shown = shown_path.display().to_string();
            let path = expand_tilde(shown_path, home);
            let label = format!("{} file", flag.trim_start_matches('-'));
            let (mut file, meta) =
                open_regular_meta(&root.at(&path), "JSON input", None).map_err(|e| {
                    refuse(
                        open_failure(&path, &label, &shown, e.message()),
                        open_hint(flag, shape),
                    )
                })?;
            read_sized(&mut file, &path, meta.len(), MAX_INPUT_BYTES)
                .map_err(|e| {
                    refuse(
                        format!("{label} '{shown}' cannot be read: {}", e.message()),
                        None,
                    )
                })?
                .ok_or_else(|| refuse(format!("JSON input exceeds one MiB: {named}"), None))?
        }
    };
    let invalid = |why: String| {
        refuse(
            format!("JSON input is invalid: {named}: {why}"),
            Some(match source {
                InputSource::File(_) => {
                    format!("{flag} takes a file holding one JSON {}", shape.name())
                }
                _ => takes(flag, shape),
            }),
        )
    };
    let text = std::str::from_utf8(&bytes).map_err(|_| invalid("not UTF-8".into()))?;
    if text.starts_with('\u{feff}') {
        return Err(invalid("it starts with a byte order mark".into()));
    }
    let value: Value = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
    checked_value(value, &source, shape, flag)
}

/// The length of `value`'s compact JSON text, counted as it is written.
fn json_length(value: &Value) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len() as u64;
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` to a writer that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// The rules every JSON input meets once it is a value, whatever its
/// source: no floats, integers the reference can read, the top-level type.
fn checked_value(
    value: Value,
    source: &InputSource,
    shape: InputShape,
    flag: &str,
) -> Result<Value, InputError> {
    let named = source.label(flag);
    let refuse = |message: String, hint: Option<String>| InputError {
        message,
        fields: source.fields(flag),
        hint,
    };
    if contains_float(&value) {
        return Err(refuse(
            format!("JSON input must not contain floats, NaN or Infinity: {named}"),
            Some("write numbers as integers".into()),
        ));
    }
    if contains_oversized_integer(&value) {
        return Err(refuse(
            format!(
                "JSON input integers must have at most {MAX_INTEGER_DIGITS} digits (the reference cannot read longer ones): {named}"
            ),
            None,
        ));
    }
    let ok = match shape {
        InputShape::List => value.is_array(),
        InputShape::Object => value.is_object(),
    };
    if !ok {
        let fault = faults::wrong_type(flag, shape.name(), &value);
        let mut fields = fault.fields;
        if let (Some(map), Value::Object(source)) = (fields.as_object_mut(), source.fields(flag)) {
            for (key, value) in source {
                map.entry(key).or_insert(value);
            }
        }
        let hint = match shape {
            InputShape::List if flag == "--evidence" => {
                "wrap the evidence in a list: [{\"kind\": \"plan\", \"summary\": \"...\"}]"
                    .to_string()
            }
            _ => match source {
                InputSource::File(_) => {
                    format!("{flag} takes a file holding one JSON {}", shape.name())
                }
                _ => takes(flag, shape),
            },
        };
        return Err(InputError {
            message: format!(
                "JSON input has the wrong top-level type: {named} holds a JSON {}, a JSON {} is expected",
                faults::type_name(&value),
                shape.name()
            ),
            fields,
            hint: Some(hint),
        });
    }
    Ok(value)
}

/// Why the file could not be opened, as the OS says it.
fn open_failure(path: &Path, label: &str, shown: &str, store_message: &str) -> String {
    match std::fs::symlink_metadata(path) {
        Err(e) => match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory => {
                format!("{label} '{shown}' does not exist")
            }
            kind => format!("{label} '{shown}' cannot be read: {kind}"),
        },
        Ok(meta) if meta.file_type().is_symlink() => {
            format!("JSON input must be a regular non-symlink file: {label} '{shown}' is a symlink")
        }
        Ok(meta) if !meta.is_file() => {
            format!(
                "JSON input must be a regular non-symlink file: {label} '{shown}' is not a regular file"
            )
        }
        Ok(_) => match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
        {
            Err(e) => format!("{label} '{shown}' cannot be read: {}", e.kind()),
            Ok(_) => format!("{label} '{shown}' cannot be read: {store_message}"),
        },
    }
}

fn open_hint(flag: &str, shape: InputShape) -> Option<String> {
    Some(takes(flag, shape))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value received as such meets the inline value's rules: its JSON
    /// text's length (counted, not made) against the 1 MiB limit, no
    /// floats, the top-level type; a fitting one is returned as it came.
    #[test]
    fn a_received_value_meets_the_inline_rules() {
        let root = StateRoot::rootless();
        let read = |value: Value, shape| {
            read_json_input(&root, &JsonArg::Value(value), shape, None, "--evidence")
        };
        let list = json!([{"kind": "k", "summary": "s", "exit_status": 3}]);
        assert_eq!(json_length(&list), list.to_string().len() as u64);
        assert_eq!(read(list.clone(), InputShape::List), Ok(list.clone()));
        let e = read(list, InputShape::Object).unwrap_err();
        assert!(
            e.message
                .contains("the evidence argument holds a JSON list"),
            "{e:?}"
        );
        let e = read(json!([{"x": 1.5}]), InputShape::List).unwrap_err();
        assert_eq!(
            e.message,
            "JSON input must not contain floats, NaN or Infinity: the evidence argument"
        );
        assert_eq!(e.fields, json!({"input": "--evidence", "source": "inline"}));
        let fits = "x".repeat(MAX_INPUT_BYTES as usize - 4);
        assert!(read(json!([fits]), InputShape::List).is_ok());
        let over = "x".repeat(MAX_INPUT_BYTES as usize - 3);
        let e = read(json!([over]), InputShape::List).unwrap_err();
        assert_eq!(
            e.message,
            "JSON input exceeds one MiB: the evidence argument"
        );
    }
}
