//! JSON input files (`--evidence`, `--input`, `--decision`,
//! `--changed-paths`, `--approval-policy`): a regular non-symlink file of
//! at most 1 MiB holding UTF-8 JSON of the expected top-level type. Floats
//! are refused, and so are integers the reference could not read back (over
//! 4,300 digits). Every refusal names the flag and the file, and reads an OS
//! error as one ("evidence file 'x' does not exist"), never as Python's
//! `[Errno N]` text (issue 15).

use serde_json::{Value, json};
use std::ffi::OsString;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::paths::expand_tilde;
use super::secure::{open_regular, read_limited};
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

/// Read and parse the JSON input file of `flag` (`--evidence`, `--input`,
/// ...).
pub fn read_json_input(
    path: &Path,
    shape: InputShape,
    home: Option<&OsString>,
    flag: &str,
) -> Result<Value, InputError> {
    let shown = path.display().to_string();
    let path = expand_tilde(path, home);
    let label = format!("{} file", flag.trim_start_matches('-'));
    let refuse = |message: String, hint: Option<String>| InputError {
        message,
        fields: json!({"input": flag, "file": shown}),
        hint,
    };
    let mut file = open_regular(&path, "JSON input", None).map_err(|e| {
        refuse(
            open_failure(&path, &label, &shown, e.message()),
            open_hint(flag),
        )
    })?;
    let bytes = read_limited(&mut file, &path, MAX_INPUT_BYTES)
        .map_err(|e| {
            refuse(
                format!("{label} '{shown}' cannot be read: {}", e.message()),
                None,
            )
        })?
        .ok_or_else(|| {
            refuse(
                format!("JSON input exceeds one MiB: {label} '{shown}'"),
                None,
            )
        })?;
    let invalid = |why: String| {
        refuse(
            format!("JSON input is invalid: {label} '{shown}': {why}"),
            Some(format!(
                "{flag} takes a file holding one JSON {}",
                shape.name()
            )),
        )
    };
    let text = std::str::from_utf8(&bytes).map_err(|_| invalid("not UTF-8".into()))?;
    if text.starts_with('\u{feff}') {
        return Err(invalid("it starts with a byte order mark".into()));
    }
    let value: Value = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
    if contains_float(&value) {
        return Err(refuse(
            format!("JSON input must not contain floats, NaN or Infinity: {label} '{shown}'"),
            Some("write numbers as integers".into()),
        ));
    }
    if contains_oversized_integer(&value) {
        return Err(refuse(
            format!(
                "JSON input integers must have at most {MAX_INTEGER_DIGITS} digits (the reference cannot read longer ones): {label} '{shown}'"
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
        if let Some(map) = fields.as_object_mut() {
            map.insert("file".into(), json!(shown));
        }
        let hint = match shape {
            InputShape::List if flag == "--evidence" => {
                "wrap the evidence in a list: [{\"kind\": \"plan\", \"summary\": \"...\"}]"
                    .to_string()
            }
            _ => format!("{flag} takes a file holding one JSON {}", shape.name()),
        };
        return Err(InputError {
            message: format!(
                "JSON input has the wrong top-level type: {label} '{shown}' holds a JSON {}, a JSON {} is expected",
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

fn open_hint(flag: &str) -> Option<String> {
    Some(match flag {
        "--evidence" => "--evidence takes the path of a JSON file, not the text itself: echo '[{\"kind\": \"user_approval\", \"summary\": \"user approved\"}]' > evidence.json".to_string(),
        _ => format!("{flag} takes the path of an existing JSON file"),
    })
}
