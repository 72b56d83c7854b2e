//! JSON input files (`--evidence`, `--input`, `--decision`,
//! `--changed-paths`): a regular non-symlink file of at most 1 MiB holding
//! UTF-8 JSON of the expected top-level type. Floats are refused, and so are
//! integers the reference could not read back (over 4,300 digits).

use serde_json::Value;
use std::ffi::OsString;
use std::path::Path;

use super::error::{StoreError, StoreResult};
use super::paths::expand_tilde;
use super::secure::{open_regular, read_limited};
use crate::receipt::canonical::{MAX_INTEGER_DIGITS, contains_float, contains_oversized_integer};

const MAX_INPUT_BYTES: u64 = 1_048_576;

/// The expected top-level JSON type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputShape {
    List,
    Object,
}

/// Read and parse one JSON input file.
pub fn read_json_input(
    path: &Path,
    shape: InputShape,
    home: Option<&OsString>,
) -> StoreResult<Value> {
    let path = expand_tilde(path, home);
    let mut file = open_regular(&path, "JSON input", None).map_err(|e| match e {
        StoreError::Io(m) => StoreError::Io(m),
        _ => StoreError::invalid("JSON input must be a regular non-symlink file"),
    })?;
    let bytes = read_limited(&mut file, &path, MAX_INPUT_BYTES)?
        .ok_or_else(|| StoreError::invalid("JSON input exceeds one MiB"))?;
    let text =
        std::str::from_utf8(&bytes).map_err(|_| StoreError::invalid("JSON input is invalid"))?;
    if text.starts_with('\u{feff}') {
        return Err(StoreError::invalid("JSON input is invalid"));
    }
    let value: Value =
        serde_json::from_str(text).map_err(|_| StoreError::invalid("JSON input is invalid"))?;
    if contains_float(&value) {
        return Err(StoreError::invalid(
            "JSON input must not contain floats, NaN or Infinity",
        ));
    }
    if contains_oversized_integer(&value) {
        return Err(StoreError::invalid(format!(
            "JSON input integers must have at most {MAX_INTEGER_DIGITS} digits (the reference cannot read longer ones)"
        )));
    }
    let ok = match shape {
        InputShape::List => value.is_array(),
        InputShape::Object => value.is_object(),
    };
    if !ok {
        return Err(StoreError::invalid(
            "JSON input has the wrong top-level type",
        ));
    }
    Ok(value)
}
