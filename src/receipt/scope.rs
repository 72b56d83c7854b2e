//! The lexical write-scope rules (reference-coordinator §1.7): entry shape
//! and pathlib-style splitting. Pure; the symlink walk under the repo root
//! is `store::scope`.

use serde_json::Value;

use super::primitives::char_len;
use super::rules::Limits;

pub const NOT_A_BOUNDED_LIST: &str = "write_scope must be a bounded list";
pub const NOT_CANONICAL: &str = "write scope must be canonical and relative";
pub const TRAVERSAL: &str = "write scope must not contain traversal";
pub const SYMLINK: &str = "contained path includes a symlink";
pub const ESCAPES: &str = "write scope escapes repo_root";

/// The entries of a write-scope list: a JSON list of at most
/// `max_write_scopes` items.
pub fn scope_entries<'a>(scopes: &'a Value, limits: &Limits) -> Result<&'a [Value], &'static str> {
    match scopes.as_array() {
        Some(items) if items.len() as u64 <= limits.max_write_scopes => Ok(items),
        _ => Err(NOT_A_BOUNDED_LIST),
    }
}

/// One entry's path components, split the way Python's pathlib does (empty
/// and `.` components disappear, so `//`, `/./` and a trailing `/` collapse).
/// The entry must be a non-empty string of at most `max_chars` code points,
/// relative, without `\`, `*`, `?`, `[` or control characters, and no
/// component may be `..`. `"."` has no components (it names the root).
pub fn entry_components(entry: &Value, max_chars: u64) -> Result<Vec<&str>, &'static str> {
    let Some(text) = entry.as_str() else {
        return Err(NOT_CANONICAL);
    };
    if text.is_empty()
        || char_len(text) as u64 > max_chars
        || text.starts_with('/')
        || text
            .chars()
            .any(|c| matches!(c, '\\' | '*' | '?' | '[') || (c as u32) < 0x20)
    {
        return Err(NOT_CANONICAL);
    }
    let components: Vec<&str> = text
        .split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .collect();
    if components.contains(&"..") {
        return Err(TRAVERSAL);
    }
    Ok(components)
}

/// The canonical (POSIX relative) form of a component list: `"."` for none.
pub fn join_components(components: &[&str]) -> String {
    if components.is_empty() {
        ".".to_string()
    } else {
        components.join("/")
    }
}

/// The purely lexical canonicalisation: every rule except the repo root and
/// the symlink walk. Duplicates are dropped, keeping the first occurrence.
pub fn canonicalize_lexical(scopes: &Value, limits: &Limits) -> Result<Vec<String>, &'static str> {
    let mut canonical: Vec<String> = Vec::new();
    for entry in scope_entries(scopes, limits)? {
        let normalized = join_components(&entry_components(entry, limits.max_evidence_path_chars)?);
        if !canonical.contains(&normalized) {
            canonical.push(normalized);
        }
    }
    Ok(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn limits() -> Limits {
        Limits::default()
    }

    #[test]
    fn pathlib_splitting_collapses_and_dedups() {
        assert_eq!(
            canonicalize_lexical(&json!(["src/", "./docs", "src"]), &limits()),
            Ok(vec!["src".to_string(), "docs".to_string()])
        );
        assert_eq!(
            canonicalize_lexical(&json!(["a//b", "a/./b/", "a/b/."]), &limits()),
            Ok(vec!["a/b".to_string()])
        );
        // "." and "./" name the repo root itself.
        assert_eq!(
            canonicalize_lexical(&json!([".", "./", "x"]), &limits()),
            Ok(vec![".".to_string(), "x".to_string()])
        );
        // Characters the rules do not mention are kept (DEL, space, ~, é).
        assert_eq!(
            canonicalize_lexical(&json!(["a\u{7f}", "a b", "~", "é/ü"]), &limits()),
            Ok(vec![
                "a\u{7f}".to_string(),
                "a b".to_string(),
                "~".to_string(),
                "é/ü".to_string()
            ])
        );
        assert_eq!(canonicalize_lexical(&json!([]), &limits()), Ok(vec![]));
    }

    #[test]
    fn entry_shape_rules() {
        for bad in [
            json!(""),
            json!("/abs"),
            json!("a\\b"),
            json!("a*"),
            json!("a?"),
            json!("a[0]"),
            json!("a\nb"),
            json!("a\u{1f}"),
            json!("\t"),
            json!(1),
            json!(null),
            json!(["a"]),
            json!("x".repeat(257)),
            json!("é".repeat(257)),
        ] {
            assert_eq!(entry_components(&bad, 256), Err(NOT_CANONICAL), "{bad:?}");
        }
        // 256 code points is the limit, whatever their byte length.
        assert!(entry_components(&json!("é".repeat(256)), 256).is_ok());
    }

    #[test]
    fn traversal_is_refused_after_splitting() {
        for bad in ["..", "../x", "a/..", "a/../b", "./..", "a//../b"] {
            assert_eq!(entry_components(&json!(bad), 256), Err(TRAVERSAL), "{bad}");
        }
        // A dotted name is not traversal.
        assert_eq!(
            entry_components(&json!("a..b/...c"), 256),
            Ok(vec!["a..b", "...c"])
        );
    }

    #[test]
    fn the_list_is_bounded() {
        let max = limits().max_write_scopes as usize;
        let full: Vec<String> = (0..max).map(|i| format!("p{i}")).collect();
        assert_eq!(
            canonicalize_lexical(&json!(full), &limits()).map(|v| v.len()),
            Ok(max)
        );
        let over: Vec<String> = (0..=max).map(|i| format!("p{i}")).collect();
        assert_eq!(
            canonicalize_lexical(&json!(over), &limits()),
            Err(NOT_A_BOUNDED_LIST)
        );
        assert_eq!(
            canonicalize_lexical(&json!("src"), &limits()),
            Err(NOT_A_BOUNDED_LIST)
        );
        // The first bad entry decides.
        assert_eq!(
            canonicalize_lexical(&json!(["a/..", "/x"]), &limits()),
            Err(TRAVERSAL)
        );
    }
}
