//! The RFC 6962 Merkle tree over a run's receipt lines
//! (contracts/transparency.md). Pure: the stored hashes come in through a
//! [`HashReader`], so every rule here is tested without files.
//!
//! Leaf *i* (0-based) is receipt line *i+1* without its LF; leaf hash =
//! SHA-256(0x00 ‖ line), node hash = SHA-256(0x01 ‖ left ‖ right). Stored
//! hashes are in Go tlog's stored-hash order (`StoredHashIndex`): appending
//! leaf *n* appends the hashes [`hashes_for_leaf`] returns at index
//! `stored_hash_index(0, n)`. The maths is Cloudflare's `tlog_tiles`, a port
//! of golang.org/x/mod/sumdb/tlog; this module adds the bounds a hostile
//! proof must not get past (the port asserts where Go returns an error).

pub use tlog_tiles::tlog::{
    EMPTY_HASH, HASH_SIZE, Hash, HashReader, node_hash, record_hash, stored_hash_count,
    stored_hash_index,
};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// No tree of ours has 2^63 leaves: a proof never has more hashes.
pub const MAX_PROOF_HASHES: usize = 63;

/// Why a tree operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MerkleError {
    /// The stored hashes could not be read (missing, short, unreadable).
    Read(String),
    /// A proof does not prove what it claims.
    InvalidProof,
    /// Sizes or indexes outside the tree.
    OutOfRange(String),
}

impl std::fmt::Display for MerkleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MerkleError::Read(m) => write!(f, "stored tree hashes unreadable: {m}"),
            MerkleError::InvalidProof => f.write_str("invalid transparency proof"),
            MerkleError::OutOfRange(m) => f.write_str(m),
        }
    }
}

fn from_tlog(e: tlog_tiles::tlog::Error) -> MerkleError {
    match e {
        tlog_tiles::tlog::Error::InvalidProof => MerkleError::InvalidProof,
        other => MerkleError::Read(other.to_string()),
    }
}

/// The leaf hash of one receipt line (`line` without its LF).
pub fn leaf_hash(line: &[u8]) -> Hash {
    record_hash(line)
}

/// The stored hashes to append after leaf `n` (0-based), given the earlier
/// ones: the leaf hash, then one hash per subtree it completes.
pub fn hashes_for_leaf(n: u64, leaf: Hash, r: &impl HashReader) -> Result<Vec<Hash>, MerkleError> {
    tlog_tiles::tlog::stored_hashes_for_record_hash(n, leaf, r).map_err(from_tlog)
}

/// The root of the tree over the first `n` leaves (O(log n) reads).
pub fn tree_root(n: u64, r: &impl HashReader) -> Result<Hash, MerkleError> {
    tlog_tiles::tlog::tree_hash(n, r).map_err(from_tlog)
}

/// The inclusion proof of leaf `index` in the tree of `size` leaves.
pub fn inclusion_proof(
    size: u64,
    index: u64,
    r: &impl HashReader,
) -> Result<Vec<Hash>, MerkleError> {
    if index >= size {
        return Err(MerkleError::OutOfRange(format!(
            "leaf {index} is not in a tree of {size}"
        )));
    }
    tlog_tiles::tlog::prove_record(size, index, r).map_err(from_tlog)
}

/// The consistency proof that the tree of `new_size` leaves extends the
/// tree of `old_size` leaves (RFC 6962 §2.1.2).
pub fn consistency_proof(
    new_size: u64,
    old_size: u64,
    r: &impl HashReader,
) -> Result<Vec<Hash>, MerkleError> {
    if old_size == 0 || old_size > new_size {
        return Err(MerkleError::OutOfRange(format!(
            "a tree of {new_size} cannot extend a tree of {old_size}"
        )));
    }
    tlog_tiles::tlog::prove_tree(new_size, old_size, r).map_err(from_tlog)
}

/// Check that `proof` shows leaf `index` with hash `leaf` in the tree of
/// `size` leaves with root `root` (Go's `tlog.CheckRecord`).
pub fn check_inclusion(
    proof: &[Hash],
    size: u64,
    root: Hash,
    index: u64,
    leaf: Hash,
) -> Result<(), MerkleError> {
    if size == 0 || index >= size || size >> 63 != 0 || proof.len() > MAX_PROOF_HASHES {
        return Err(MerkleError::InvalidProof);
    }
    tlog_tiles::tlog::check_record(&proof.to_vec(), size, root, index, leaf).map_err(from_tlog)
}

/// Check that `proof` shows the tree of `new_size` leaves with root
/// `new_root` extends the tree of `old_size` leaves with root `old_root`
/// (Go's `tlog.CheckTree`).
pub fn check_consistency(
    proof: &[Hash],
    new_size: u64,
    new_root: Hash,
    old_size: u64,
    old_root: Hash,
) -> Result<(), MerkleError> {
    if old_size == 0 || old_size > new_size || new_size >> 63 != 0 || proof.len() > MAX_PROOF_HASHES
    {
        return Err(MerkleError::InvalidProof);
    }
    tlog_tiles::tlog::check_tree(&proof.to_vec(), new_size, new_root, old_size, old_root)
        .map_err(from_tlog)
}

/// Standard base64 of a hash (the checkpoint and proof text encoding).
pub fn hash_to_base64(hash: &Hash) -> String {
    STANDARD.encode(hash.0)
}

/// A hash from its standard base64 text; exactly 32 bytes, canonical
/// padding.
pub fn hash_from_base64(text: &str) -> Option<Hash> {
    let bytes = STANDARD.decode(text).ok()?;
    let array: [u8; HASH_SIZE] = bytes.try_into().ok()?;
    let hash = Hash(array);
    // Refuse non-canonical encodings (trailing bits set): one hash, one text.
    (hash_to_base64(&hash) == text).then_some(hash)
}

/// Stored hashes held in memory (rebuilds and tests).
#[derive(Debug, Default, Clone)]
pub struct MemoryHashes {
    pub hashes: Vec<Hash>,
    pub leaves: u64,
}

impl HashReader for MemoryHashes {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, tlog_tiles::tlog::Error> {
        indexes
            .iter()
            .map(|&i| {
                usize::try_from(i)
                    .ok()
                    .and_then(|i| self.hashes.get(i).copied())
                    .ok_or(tlog_tiles::tlog::Error::IndexesNotInTree)
            })
            .collect()
    }
}

impl MemoryHashes {
    /// Append one leaf (a receipt line without its LF).
    pub fn push_line(&mut self, line: &[u8]) -> Result<(), MerkleError> {
        self.push_leaf(leaf_hash(line))
    }

    pub fn push_leaf(&mut self, leaf: Hash) -> Result<(), MerkleError> {
        let new = hashes_for_leaf(self.leaves, leaf, self)?;
        self.hashes.extend(new);
        self.leaves += 1;
        Ok(())
    }
}

/// The root of a growing tree in O(log n) memory: the peaks of the
/// complete subtrees, left to right (what `verify` streams the receipt
/// through).
#[derive(Debug, Default, Clone)]
pub struct RootAccumulator {
    /// (height, hash) of each complete subtree, strictly decreasing heights.
    peaks: Vec<(u32, Hash)>,
    leaves: u64,
}

impl RootAccumulator {
    pub fn leaves(&self) -> u64 {
        self.leaves
    }

    pub fn push_line(&mut self, line: &[u8]) {
        self.push_leaf(leaf_hash(line));
    }

    pub fn push_leaf(&mut self, leaf: Hash) {
        let mut node = (0u32, leaf);
        while let Some(&(height, left)) = self.peaks.last() {
            if height != node.0 {
                break;
            }
            self.peaks.pop();
            node = (height + 1, node_hash(left, node.1));
        }
        self.peaks.push(node);
        self.leaves += 1;
    }

    /// The root over the leaves pushed so far.
    pub fn root(&self) -> Hash {
        let mut peaks = self.peaks.iter().rev();
        let Some(&(_, mut hash)) = peaks.next() else {
            return EMPTY_HASH;
        };
        for &(_, left) in peaks {
            hash = node_hash(left, hash);
        }
        hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| format!("{{\"sequence\": {}}}", i + 1).into_bytes())
            .collect()
    }

    fn tree(n: usize) -> MemoryHashes {
        let mut tree = MemoryHashes::default();
        for line in lines(n) {
            tree.push_line(&line).unwrap();
        }
        tree
    }

    /// RFC 6962's definition, computed the slow way.
    fn reference_root(leaves: &[Hash]) -> Hash {
        match leaves.len() {
            0 => EMPTY_HASH,
            1 => leaves[0],
            n => {
                // The largest power of two below n.
                let k = 1usize << (usize::BITS - 1 - (n - 1).leading_zeros());
                node_hash(reference_root(&leaves[..k]), reference_root(&leaves[k..]))
            }
        }
    }

    #[test]
    fn hashes_are_rfc6962_domain_separated() {
        // SHA-256 of the empty string, and of 0x00 (the empty leaf).
        assert_eq!(
            hex::encode(EMPTY_HASH.0),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hex::encode(leaf_hash(b"").0),
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
        );
        let (a, b) = (leaf_hash(b"a"), leaf_hash(b"b"));
        assert_ne!(node_hash(a, b), node_hash(b, a));
        assert_ne!(leaf_hash(&[a.0, b.0].concat()), node_hash(a, b));
    }

    #[test]
    fn stored_hash_order_is_gos() {
        // Go's tlog: level 0's n'th hash is at n + n/2 + n/4 + ...
        assert_eq!(stored_hash_index(0, 0), 0);
        assert_eq!(stored_hash_index(0, 1), 1);
        assert_eq!(stored_hash_index(1, 0), 2);
        assert_eq!(stored_hash_index(0, 2), 3);
        assert_eq!(stored_hash_index(0, 3), 4);
        assert_eq!(stored_hash_index(1, 1), 5);
        assert_eq!(stored_hash_index(2, 0), 6);
        for n in 0..70u64 {
            assert_eq!(tree(n as usize).hashes.len() as u64, stored_hash_count(n));
        }
    }

    #[test]
    fn roots_match_the_definition_and_the_accumulator() {
        for n in 0..70 {
            let leaves: Vec<Hash> = lines(n).iter().map(|l| leaf_hash(l)).collect();
            let stored = tree(n);
            let mut acc = RootAccumulator::default();
            for leaf in &leaves {
                acc.push_leaf(*leaf);
            }
            let want = reference_root(&leaves);
            assert_eq!(tree_root(n as u64, &stored).unwrap(), want, "n={n}");
            assert_eq!(acc.root(), want, "n={n}");
            assert_eq!(acc.leaves(), n as u64);
            // A larger store answers roots of every smaller tree.
            assert_eq!(tree_root(n as u64, &tree(70)).unwrap(), want);
        }
    }

    #[test]
    fn every_inclusion_proof_checks_and_every_flipped_bit_fails() {
        let stored = tree(13);
        for size in 1..=13u64 {
            let root = tree_root(size, &stored).unwrap();
            for index in 0..size {
                let leaf = stored.hashes[stored_hash_index(0, index) as usize];
                let proof = inclusion_proof(size, index, &stored).unwrap();
                check_inclusion(&proof, size, root, index, leaf).unwrap();
                // (The proof does not commit to the size, the signed head
                // does: a size off by one is a changed note.)
                if index + 1 < size {
                    assert!(check_inclusion(&proof, size, root, index + 1, leaf).is_err());
                }
                for (i, _) in proof.iter().enumerate() {
                    let mut bad = proof.clone();
                    bad[i].0[7] ^= 0x10;
                    assert!(check_inclusion(&bad, size, root, index, leaf).is_err());
                }
                let mut longer = proof.clone();
                longer.push(leaf);
                assert!(check_inclusion(&longer, size, root, index, leaf).is_err());
            }
        }
        assert!(inclusion_proof(3, 3, &stored).is_err());
        assert!(check_inclusion(&[], 0, EMPTY_HASH, 0, EMPTY_HASH).is_err());
        assert!(check_inclusion(&[], u64::MAX, EMPTY_HASH, 0, EMPTY_HASH).is_err());
    }

    #[test]
    fn every_consistency_proof_checks_and_tampering_fails() {
        let stored = tree(17);
        for new in 1..=17u64 {
            let new_root = tree_root(new, &stored).unwrap();
            for old in 1..=new {
                let old_root = tree_root(old, &stored).unwrap();
                let proof = consistency_proof(new, old, &stored).unwrap();
                check_consistency(&proof, new, new_root, old, old_root).unwrap();
                if old < new {
                    assert!(check_consistency(&proof, new, new_root, old + 1, old_root).is_err());
                    assert!(check_consistency(&proof, new, old_root, old, new_root).is_err());
                }
                for i in 0..proof.len() {
                    let mut bad = proof.clone();
                    bad[i].0[0] ^= 1;
                    assert!(check_consistency(&bad, new, new_root, old, old_root).is_err());
                }
            }
        }
        assert!(consistency_proof(3, 4, &stored).is_err());
        assert!(consistency_proof(3, 0, &stored).is_err());
        assert!(check_consistency(&[], 3, EMPTY_HASH, 0, EMPTY_HASH).is_err());
        assert!(
            check_consistency(&vec![EMPTY_HASH; 200], 1 << 40, EMPTY_HASH, 3, EMPTY_HASH).is_err()
        );
    }

    #[test]
    fn base64_hashes_are_exact() {
        let h = leaf_hash(b"x");
        assert_eq!(hash_from_base64(&hash_to_base64(&h)), Some(h));
        assert_eq!(hash_from_base64("AAAA"), None);
        assert_eq!(hash_from_base64("not base64!"), None);
        // 32 bytes end in one padding char; a set trailing bit is not canonical.
        let text = hash_to_base64(&h);
        let mut chars: Vec<char> = text.chars().collect();
        let last = chars.len() - 2;
        chars[last] = if chars[last] == 'A' { 'B' } else { 'A' };
        let other: String = chars.into_iter().collect();
        if let Some(decoded) = hash_from_base64(&other) {
            assert_ne!(decoded, h);
        }
    }

    #[test]
    fn a_short_store_is_a_read_error_not_a_panic() {
        let short = MemoryHashes {
            hashes: tree(5).hashes[..3].to_vec(),
            leaves: 5,
        };
        assert!(matches!(tree_root(5, &short), Err(MerkleError::Read(_))));
        assert!(inclusion_proof(5, 4, &short).is_err());
    }
}
