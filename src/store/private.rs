//! Files the MCP server makes for itself: the name of the handle `resume`
//! creates beside the server's own.

use std::path::{Path, PathBuf};

/// Where `resume` puts the new handle: beside the current one (which
/// resume deletes), `<stem>-r<n>.owner` for the first n that is free.
pub fn next_handle(current: &Path) -> PathBuf {
    let stem = current
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "owner".into());
    let base = stem
        .rsplit_once("-r")
        .filter(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .map_or(stem.as_str(), |(base, _)| base)
        .to_string();
    (1..)
        .map(|n| current.with_file_name(format!("{base}-r{n}.owner")))
        .find(|candidate| std::fs::symlink_metadata(candidate).is_err())
        .unwrap_or_else(|| current.with_extension("next"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_handle_is_numbered_beside_the_current_one() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("main.owner");
        assert_eq!(next_handle(&main), dir.path().join("main-r1.owner"));
        std::fs::write(dir.path().join("main-r1.owner"), "").unwrap();
        assert_eq!(next_handle(&main), dir.path().join("main-r2.owner"));
        let r1 = dir.path().join("main-r1.owner");
        assert_eq!(next_handle(&r1), dir.path().join("main-r2.owner"));
    }
}
