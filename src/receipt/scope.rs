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

/// Whether `path` (canonical) equals the scope `entry` or lies below it
/// (`entry + "/"` prefix, so `srcx` is not below `src`). As in the
/// reference, the whole-repo entry `"."` covers only itself.
pub fn entry_covers(entry: &str, path: &str) -> bool {
    path == entry
        || path
            .strip_prefix(entry)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Why two write scopes cannot be combined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Narrowing {
    /// An entry of the parent's scope is not in canonical form.
    MalformedParent { entry: String, rule: &'static str },
    /// An entry of the child's scope is not in canonical form.
    MalformedChild { entry: String, rule: &'static str },
    /// A child entry lies outside every parent entry.
    Wider { entry: String },
}

/// One entry in canonical form: the lexical rules hold and the entry is
/// already what canonicalisation would make of it.
fn require_canonical(entry: &str, limits: &Limits) -> Result<(), &'static str> {
    let value = Value::String(entry.to_string());
    let components = entry_components(&value, limits.max_evidence_path_chars)?;
    if join_components(&components) != entry {
        return Err(NOT_CANONICAL);
    }
    Ok(())
}

/// THE rule that combines two write scopes (a replacement's or a child
/// lane's scope against its parent's): every entry of both lists must be in
/// canonical form — a malformed or unknown entry is an error, never
/// ignored — and `child` must be equal to or narrower than `parent`: an
/// empty parent allows only an empty child; otherwise every child entry is
/// covered by some parent entry ([`entry_covers`]). An empty child is
/// always narrower.
pub fn narrow_scope(parent: &[String], child: &[String], limits: &Limits) -> Result<(), Narrowing> {
    for entry in parent {
        require_canonical(entry, limits).map_err(|rule| Narrowing::MalformedParent {
            entry: entry.clone(),
            rule,
        })?;
    }
    for entry in child {
        require_canonical(entry, limits).map_err(|rule| Narrowing::MalformedChild {
            entry: entry.clone(),
            rule,
        })?;
    }
    match child
        .iter()
        .find(|entry| !parent.iter().any(|allowed| entry_covers(allowed, entry)))
    {
        Some(entry) => Err(Narrowing::Wider {
            entry: entry.clone(),
        }),
        None => Ok(()),
    }
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

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|i| i.to_string()).collect()
    }

    #[test]
    fn scopes_only_narrow() {
        let ok = |parent: &[&str], child: &[&str]| {
            narrow_scope(&list(parent), &list(child), &limits()).is_ok()
        };
        assert!(ok(&["src"], &["src"]));
        assert!(ok(&["src"], &["src/a", "src/b/c"]));
        assert!(ok(&["src", "docs"], &["docs/x"]));
        assert!(ok(&["src"], &[]));
        assert!(ok(&[], &[]));
        assert!(ok(&["."], &["."]));
        let wider = |parent: &[&str], child: &[&str], entry: &str| {
            assert_eq!(
                narrow_scope(&list(parent), &list(child), &limits()),
                Err(Narrowing::Wider {
                    entry: entry.into()
                }),
                "{parent:?} {child:?}"
            );
        };
        wider(&[], &["src"], "src");
        wider(&["src"], &["srcx"], "srcx");
        wider(&["src/a"], &["src"], "src");
        wider(&["src"], &["src/a", "lib"], "lib");
        wider(&["src"], &["."], ".");
        // The reference's "." whole-repo scope is only equal to itself.
        wider(&["."], &["src"], "src");
    }

    #[test]
    fn malformed_or_unknown_entries_are_refused_never_ignored() {
        let child = |entry: &str, rule: &'static str| {
            assert_eq!(
                narrow_scope(&list(&["src"]), &list(&[entry]), &limits()),
                Err(Narrowing::MalformedChild {
                    entry: entry.into(),
                    rule
                }),
                "{entry:?}"
            );
        };
        for entry in [
            "src/", "./src", "src//a", "src/./a", "", "/src", "src/*", "a\\b",
        ] {
            child(entry, NOT_CANONICAL);
        }
        child("src/../etc", TRAVERSAL);
        child("..", TRAVERSAL);
        assert_eq!(
            narrow_scope(&list(&["src/"]), &list(&["src/a"]), &limits()),
            Err(Narrowing::MalformedParent {
                entry: "src/".into(),
                rule: NOT_CANONICAL
            })
        );
        assert_eq!(
            narrow_scope(&list(&["../x"]), &list(&[]), &limits()),
            Err(Narrowing::MalformedParent {
                entry: "../x".into(),
                rule: TRAVERSAL
            })
        );
        // A malformed parent entry is refused even when another parent
        // entry would cover the child.
        assert!(matches!(
            narrow_scope(&list(&["src", "a/"]), &list(&["src/x"]), &limits()),
            Err(Narrowing::MalformedParent { .. })
        ));
        // An over-long entry is malformed, not merely wide.
        let long = "x".repeat(257);
        assert!(matches!(
            narrow_scope(&list(&[&long]), &list(&[&long]), &limits()),
            Err(Narrowing::MalformedParent { .. })
        ));
    }

    #[test]
    fn entries_cover_themselves_and_what_lies_below() {
        assert!(entry_covers("src", "src"));
        assert!(entry_covers("src", "src/x/y"));
        assert!(!entry_covers("src", "srcx"));
        assert!(!entry_covers("src/a", "src"));
        assert!(!entry_covers(".", "src"));
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
