//! The real `git` CLI, for `publish` and `bundle-verify --git`
//! (contracts/bundle.md): plumbing only (hash-object, mktree, commit-tree,
//! update-ref, ls-tree, cat-file, rev-list). Git is the distributed engine;
//! nothing here re-implements it.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use super::error::{StoreError, StoreResult};

/// One git repository.
#[derive(Debug, Clone)]
pub struct Git {
    pub dir: PathBuf,
}

/// One entry of `git ls-tree -r -l`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    pub mode: String,
    pub kind: String,
    pub id: String,
    pub size: Option<u64>,
    pub path: String,
}

fn git_error(what: &str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::invalid(format!("git {what} failed: {detail}"))
}

impl Git {
    /// A repository (bare or not); refused when `git` is missing or `dir`
    /// is not one.
    pub fn open(dir: &Path) -> StoreResult<Git> {
        let git = Git {
            dir: dir.to_path_buf(),
        };
        git.run(&["rev-parse", "--git-dir"], None).map_err(|e| {
            StoreError::invalid(format!(
                "{} is not a git repository (or git is missing): {e}",
                dir.display()
            ))
        })?;
        Ok(git)
    }

    fn command(&self) -> Command {
        let mut command = Command::new("git");
        command
            .arg("-C")
            .arg(&self.dir)
            // Our commits carry our identity: a bare repository needs none.
            .env("GIT_AUTHOR_NAME", "bluetape-flow")
            .env("GIT_AUTHOR_EMAIL", "bluetape-flow@localhost")
            .env("GIT_COMMITTER_NAME", "bluetape-flow")
            .env("GIT_COMMITTER_EMAIL", "bluetape-flow@localhost")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .env_remove("GIT_OBJECT_DIRECTORY");
        command
    }

    /// Run `git args`, feeding `input`; its stdout (trailing LF kept).
    pub fn run(&self, args: &[&str], input: Option<&[u8]>) -> StoreResult<Vec<u8>> {
        let what = args
            .iter()
            .copied()
            .find(|a| !a.starts_with('-') && !a.contains('='))
            .unwrap_or("git");
        let mut child = self
            .command()
            .args(args)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| git_error(what, e))?;
        if let Some(bytes) = input {
            let mut stdin = child.stdin.take().expect("piped");
            let bytes = bytes.to_vec();
            // A writer thread: git may answer before it read everything.
            let writer = std::thread::spawn(move || stdin.write_all(&bytes));
            let out = child.wait_with_output().map_err(|e| git_error(what, e))?;
            let _ = writer.join();
            return finish(what, out);
        }
        let out = child.wait_with_output().map_err(|e| git_error(what, e))?;
        finish(what, out)
    }

    fn line(&self, args: &[&str], input: Option<&[u8]>) -> StoreResult<String> {
        let out = self.run(args, input)?;
        Ok(String::from_utf8_lossy(&out).trim_end().to_string())
    }

    /// The commit a ref names, or `None` when it does not exist.
    pub fn resolve(&self, reference: &str) -> StoreResult<Option<String>> {
        let out = self
            .command()
            .args(["rev-parse", "--verify", "--quiet"])
            .arg(format!("{reference}^{{commit}}"))
            .output()
            .map_err(|e| git_error("rev-parse", e))?;
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Ok((out.status.success() && !text.is_empty()).then_some(text))
    }

    /// Whether `reference` is a valid ref name under `refs/`.
    pub fn check_ref(&self, reference: &str) -> bool {
        reference.starts_with("refs/")
            && self
                .command()
                .args(["check-ref-format", reference])
                .output()
                .is_ok_and(|o| o.status.success())
    }

    /// Store a blob (git writes it only if it is new); its id. Loose
    /// objects are compressed at zlib level 1: a publication's new segment
    /// is written in a few milliseconds (`git gc` repacks them anyway).
    pub fn hash_object(&self, bytes: &[u8]) -> StoreResult<String> {
        self.line(
            &[
                "-c",
                "core.looseCompression=1",
                "hash-object",
                "-w",
                "--stdin",
            ],
            Some(bytes),
        )
    }

    /// A tree of blobs and trees: `(mode, kind, id, name)` each, written
    /// by `git hash-object -t tree -w`, which checks the tree (fsck: order,
    /// names, modes, ids) before it writes it. `git mktree` would also look
    /// up every entry's object, one open per loose object: a publication's
    /// receipt tree has an entry per 256 events, all of them already in
    /// the parent commit's tree or just written.
    pub fn mktree(&self, entries: &[(&str, &str, String, String)]) -> StoreResult<String> {
        let mut sorted: Vec<_> = entries.iter().collect();
        // Git's tree order: names as bytes, a tree's as if it ended in '/'.
        let key = |(_, kind, _, name): &&(&str, &str, String, String)| {
            let mut key = name.as_bytes().to_vec();
            if *kind == "tree" {
                key.push(b'/');
            }
            key
        };
        sorted.sort_by_cached_key(key);
        let mut content = Vec::new();
        for (mode, _, id, name) in sorted {
            let raw = hex::decode(id).map_err(|_| git_error("mktree", format!("bad id {id}")))?;
            // Raw trees spell a directory's mode without its leading zero.
            content.extend_from_slice(mode.trim_start_matches('0').as_bytes());
            content.push(b' ');
            content.extend_from_slice(name.as_bytes());
            content.push(0);
            content.extend_from_slice(&raw);
        }
        self.line(
            &["hash-object", "-t", "tree", "-w", "--stdin"],
            Some(&content),
        )
    }

    pub fn commit_tree(
        &self,
        tree: &str,
        parent: Option<&str>,
        message: &str,
    ) -> StoreResult<String> {
        let mut args = vec!["commit-tree", tree];
        if let Some(parent) = parent {
            args.extend(["-p", parent]);
        }
        self.line(&args, Some(message.as_bytes()))
    }

    /// Move `reference` from `old` (None: it must not exist) to `new`,
    /// atomically. `Ok(false)`: the ref was not at `old`.
    pub fn update_ref(&self, reference: &str, new: &str, old: Option<&str>) -> StoreResult<bool> {
        let out = self
            .command()
            .args(["update-ref", reference, new, old.unwrap_or("")])
            .output()
            .map_err(|e| git_error("update-ref", e))?;
        Ok(out.status.success())
    }

    /// Every entry of a commit's tree, recursively, with blob sizes.
    pub fn ls_tree(&self, commit: &str, sizes: bool) -> StoreResult<Vec<TreeEntry>> {
        // `-l` reads every blob's header: only a verifier needs the sizes.
        let args: &[&str] = if sizes {
            &["ls-tree", "-r", "-l", "-z", "--full-tree", commit]
        } else {
            &["ls-tree", "-r", "-z", "--full-tree", commit]
        };
        let out = self.run(args, None)?;
        let mut entries = Vec::new();
        for record in out.split(|b| *b == 0).filter(|r| !r.is_empty()) {
            let text = String::from_utf8_lossy(record);
            let (meta, path) = text
                .split_once('\t')
                .ok_or_else(|| git_error("ls-tree", "unexpected output"))?;
            let parts: Vec<&str> = meta.split_whitespace().collect();
            let (mode, kind, id, size) = match parts[..] {
                [mode, kind, id, size] => (mode, kind, id, size),
                [mode, kind, id] if !sizes => (mode, kind, id, "-"),
                _ => return Err(git_error("ls-tree", "unexpected output")),
            };
            entries.push(TreeEntry {
                mode: mode.to_string(),
                kind: kind.to_string(),
                id: id.to_string(),
                size: size.parse().ok(),
                path: path.to_string(),
            });
        }
        Ok(entries)
    }

    /// The commits of a ref, newest first, each with its parents.
    pub fn history(&self, reference: &str) -> StoreResult<Vec<(String, Vec<String>)>> {
        let out = self.run(&["rev-list", "--parents", reference, "--"], None)?;
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .map(|line| {
                let mut ids = line.split_whitespace().map(str::to_string);
                let commit = ids.next().unwrap_or_default();
                (commit, ids.collect())
            })
            .collect())
    }

    /// A reader of objects (`git cat-file --batch`).
    pub fn objects(&self) -> StoreResult<Objects> {
        let mut child = self
            .command()
            .args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| git_error("cat-file", e))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::with_capacity(1 << 16, child.stdout.take().expect("piped"));
        Ok(Objects {
            child,
            stdin: Some(stdin),
            stdout,
            remaining: 0,
        })
    }
}

fn finish(what: &str, out: std::process::Output) -> StoreResult<Vec<u8>> {
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(git_error(
            what,
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ))
    }
}

/// `git cat-file --batch`: one blob at a time, streamed.
pub struct Objects {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    remaining: u64,
}

impl Objects {
    /// Start reading blob `id`; its size.
    pub fn open(&mut self, id: &str) -> StoreResult<u64> {
        self.skip()?;
        let stdin = self.stdin.as_mut().expect("open");
        writeln!(stdin, "{id}")
            .and_then(|_| stdin.flush())
            .map_err(|e| git_error("cat-file", e))?;
        let mut header = String::new();
        self.stdout
            .read_line(&mut header)
            .map_err(|e| git_error("cat-file", e))?;
        let parts: Vec<&str> = header.split_whitespace().collect();
        match parts[..] {
            [_, "blob", size] => {
                let size = size
                    .parse()
                    .map_err(|_| git_error("cat-file", "bad size"))?;
                self.remaining = size + 1;
                Ok(size)
            }
            _ => Err(StoreError::invalid(format!(
                "git object {id} is not a blob: {}",
                header.trim()
            ))),
        }
    }

    /// Read from the current blob (0 at its end).
    pub fn read(&mut self, buf: &mut [u8]) -> StoreResult<usize> {
        if self.remaining <= 1 {
            return Ok(0);
        }
        let want = buf.len().min((self.remaining - 1).min(1 << 20) as usize);
        self.read_some(&mut buf[..want])
    }

    /// Read what the object has next into `buf` (which it must fill at
    /// least in part: an object that ends early is an error).
    fn read_some(&mut self, buf: &mut [u8]) -> StoreResult<usize> {
        let n = self
            .stdout
            .read(buf)
            .map_err(|e| git_error("cat-file", e))?;
        if n == 0 {
            return Err(git_error("cat-file", "object ends early"));
        }
        self.remaining -= n as u64;
        Ok(n)
    }

    /// A whole blob of at most `max` bytes.
    pub fn read_all(&mut self, id: &str, max: u64) -> StoreResult<Vec<u8>> {
        let size = self.open(id)?;
        if size > max {
            return Err(StoreError::invalid(format!(
                "git object {id} is larger than {max} bytes"
            )));
        }
        let mut bytes = vec![0u8; size as usize];
        let mut filled = 0;
        while filled < bytes.len() {
            filled += self.read(&mut bytes[filled..])?;
        }
        Ok(bytes)
    }

    fn skip(&mut self) -> StoreResult<()> {
        let mut sink = [0u8; 8192];
        while self.remaining > 0 {
            let want = sink.len().min(self.remaining as usize);
            self.read_some(&mut sink[..want])?;
        }
        Ok(())
    }
}

impl Drop for Objects {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}
