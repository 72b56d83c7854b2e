//! bluetape-flow: a guarded, hash-chained state ledger for multi-lane agent runs.
//!
//! Layers, with no cycles: two shells, `cli` (argv, the process) and `mcp`
//! (tools over stdio; `cli` starts it), → `surface` (every command's one
//! definition, dispatch and answers) → `commands` → `coordinator` (pure
//! rules) → `receipt` (pure formats: canonical JSON, the event and manifest
//! contracts, streaming verification). `commands` → `store`, the only
//! module that touches the filesystem; `store` writes its files in the
//! `receipt` formats and never calls the layers above it.

pub mod cli;
pub mod commands;
pub mod coordinator;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod receipt;
pub mod store;
pub mod surface;

#[cfg(test)]
mod layers {
    /// The layers import only downwards (this file's first paragraph): no
    /// module names one above it outside a comment.
    #[test]
    fn no_layer_imports_one_above_it() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let rules: [(&str, &[&str]); 7] = [
            ("mcp", &["crate::cli"]),
            ("surface", &["crate::cli", "crate::mcp"]),
            ("commands", &["crate::cli", "crate::mcp", "crate::surface"]),
            // FlowError (coordinator::decide) carries the store's error
            // kind to the envelope: the one name of `store` it holds.
            (
                "coordinator",
                &[
                    "crate::cli",
                    "crate::mcp",
                    "crate::surface",
                    "crate::commands",
                ],
            ),
            (
                "receipt",
                &[
                    "crate::cli",
                    "crate::mcp",
                    "crate::surface",
                    "crate::commands",
                    "crate::coordinator",
                    "crate::store",
                ],
            ),
            (
                "store",
                &[
                    "crate::cli",
                    "crate::mcp",
                    "crate::surface",
                    "crate::commands",
                    "crate::coordinator",
                ],
            ),
            ("cli", &[]),
        ];
        let mut seen = 0;
        for (layer, above) in rules {
            let mut dirs = vec![src.join(layer)];
            while let Some(dir) = dirs.pop() {
                for entry in std::fs::read_dir(&dir).unwrap() {
                    let path = entry.unwrap().path();
                    if path.is_dir() {
                        dirs.push(path);
                        continue;
                    }
                    if path.extension().is_none_or(|e| e != "rs") {
                        continue;
                    }
                    seen += 1;
                    let text = std::fs::read_to_string(&path).unwrap();
                    for (n, line) in text.lines().enumerate() {
                        let code = line.trim_start();
                        if code.starts_with("//") {
                            continue;
                        }
                        for name in above {
                            assert!(
                                !code.contains(name),
                                "{}:{}: {layer} names {name}",
                                path.display(),
                                n + 1
                            );
                        }
                    }
                }
            }
        }
        assert!(seen > 50, "{seen} files read");
    }
}
