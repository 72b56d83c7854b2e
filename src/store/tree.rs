//! `runs/<id>/tree-hashes`: the stored hashes of the run's Merkle tree
//! (contracts/transparency.md). 32-byte hashes, nothing else, in
//! Go tlog's stored-hash order, so a tree of `n` leaves is exactly
//! `stored_hash_count(n) * 32` bytes. Derived data, like the digest table:
//! appended under the receipt lock after each append, read by `pread`,
//! and rebuilt from the receipt whenever its length or its last leaf does
//! not match the receipt.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::error::{StoreError, StoreResult};
use super::secure::{Durability, FILE_MODE, atomic_write_with, check_metadata, open_regular};
use crate::receipt::merkle::{
    HASH_SIZE, Hash, HashReader, MerkleError, hashes_for_leaf, stored_hash_count, stored_hash_index,
};

/// The tree file of one run.
#[derive(Debug, Clone)]
pub struct TreeFile {
    path: PathBuf,
    run: super::run::RunDir,
}

/// An open tree file known to hold exactly the hashes of `leaves` leaves.
#[derive(Debug)]
pub struct StoredTree {
    file: File,
    leaves: u64,
    /// The hash at this index as `open` read and checked it (the last
    /// leaf, which the next append's subtree hashes read again).
    checked: Option<(u64, Hash)>,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> StoreError + '_ {
    move |e| StoreError::io(&e, path)
}

impl TreeFile {
    /// The tree file of `run`, reached through its held directory.
    pub fn of_run(run: &super::run::RunDir) -> TreeFile {
        TreeFile {
            path: run.dir.join("tree-hashes"),
            run: run.clone(),
        }
    }

    fn at(&self) -> StoreResult<super::held::Loc> {
        self.run.place(&self.path)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The stored tree, if the file holds exactly the hashes of `leaves`
    /// leaves and its last leaf hash is `last_leaf` (anything else: `None`,
    /// and the caller rebuilds).
    pub fn open(&self, leaves: u64, last_leaf: Option<Hash>, write: bool) -> Option<StoredTree> {
        let at = self.at().ok()?;
        let file = if write {
            at.open(rustix::fs::OFlags::RDWR, 0).ok()?
        } else {
            open_regular(&at, "tree hashes", None).ok()?
        };
        let meta = file.metadata().ok()?;
        check_metadata(&meta, "tree hashes", FILE_MODE).ok()?;
        if !meta.is_file() || meta.len() != stored_hash_count(leaves) * HASH_SIZE as u64 {
            return None;
        }
        let mut tree = StoredTree {
            file,
            leaves,
            checked: None,
        };
        if leaves > 0 {
            let index = stored_hash_index(0, leaves - 1);
            let stored = tree.hash_at(index).ok()?;
            if Some(stored) != last_leaf {
                return None;
            }
            tree.checked = Some((index, stored));
        }
        Some(tree)
    }

    /// Replace the file with `hashes` (a rebuild). Derived and checked
    /// before use, so nothing is synced.
    pub fn rewrite(&self, hashes: &[Hash]) -> StoreResult<()> {
        let mut bytes = Vec::with_capacity(hashes.len() * HASH_SIZE);
        for hash in hashes {
            bytes.extend_from_slice(&hash.0);
        }
        atomic_write_with(&self.at()?, &bytes, Durability::None)
    }
}

impl StoredTree {
    pub fn leaves(&self) -> u64 {
        self.leaves
    }

    fn hash_at(&self, index: u64) -> std::io::Result<Hash> {
        if let Some((at, hash)) = self.checked
            && at == index
        {
            return Ok(hash);
        }
        let mut buf = [0u8; HASH_SIZE];
        self.file
            .read_exact_at(&mut buf, index * HASH_SIZE as u64)?;
        Ok(Hash(buf))
    }

    /// Append leaf number `self.leaves` (0-based): one write of the leaf
    /// hash and the subtree hashes it completes, at the end of the file.
    pub fn append_leaf(&mut self, leaf: Hash, path: &Path) -> StoreResult<()> {
        let new = hashes_for_leaf(self.leaves, leaf, self)
            .map_err(|e| StoreError::io_other(path, &e.to_string()))?;
        let mut bytes = Vec::with_capacity(new.len() * HASH_SIZE);
        for hash in &new {
            bytes.extend_from_slice(&hash.0);
        }
        let offset = stored_hash_index(0, self.leaves) * HASH_SIZE as u64;
        self.file.write_all_at(&bytes, offset).map_err(io(path))?;
        self.file.flush().map_err(io(path))?;
        self.leaves += 1;
        Ok(())
    }
}

impl HashReader for StoredTree {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, tlog_tiles::tlog::Error> {
        let limit = stored_hash_count(self.leaves);
        indexes
            .iter()
            .map(|&i| {
                if i >= limit {
                    return Err(tlog_tiles::tlog::Error::IndexesNotInTree);
                }
                self.hash_at(i)
                    .map_err(|_| tlog_tiles::tlog::Error::IndexesNotInTree)
            })
            .collect()
    }
}

/// A read error of the stored tree as a store error.
pub fn tree_error(e: MerkleError) -> StoreError {
    StoreError::io_other(std::path::Path::new("tree hashes"), &e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::merkle::{MemoryHashes, leaf_hash, tree_root};

    #[test]
    fn appended_hashes_equal_a_rebuild_and_mismatches_are_refused() {
        let (_dir, run) = crate::store::test_dirs::run_dir();
        let file = TreeFile::of_run(&run);
        assert!(file.open(0, None, false).is_none());
        file.rewrite(&[]).unwrap();
        let mut memory = MemoryHashes::default();
        let mut last = None;
        for i in 0..40u64 {
            let leaf = leaf_hash(format!("line {i}").as_bytes());
            let mut tree = file.open(i, last, true).expect("matching tree");
            tree.append_leaf(leaf, file.path()).unwrap();
            memory.push_leaf(leaf).unwrap();
            last = Some(leaf);
            let stored = file.open(i + 1, last, false).unwrap();
            assert_eq!(
                tree_root(i + 1, &stored).unwrap(),
                tree_root(i + 1, &memory).unwrap()
            );
        }
        assert_eq!(
            std::fs::read(file.path()).unwrap().len(),
            memory.hashes.len() * 32
        );
        // Wrong length, wrong last leaf: not this tree.
        assert!(file.open(39, last, false).is_none());
        assert!(file.open(40, Some(leaf_hash(b"other")), false).is_none());
        // A symlink is never followed for writing.
        let link = run.dir.join("link");
        std::os::unix::fs::symlink(file.path(), &link).unwrap();
        std::fs::rename(&link, file.path()).unwrap();
        assert!(file.open(40, last, true).is_none());
        assert!(file.open(40, last, false).is_none());
    }
}
