//! Files of the audit bundle (contracts/bundle.md): reading a run's members
//! from the state root for `bundle-export`, and opening a bundle file to
//! verify.

use std::io::{BufRead, Read};

use sha2::{Digest, Sha256};

use super::error::{StoreError, StoreResult};
use super::root::InRoot;
use super::run::RunDir;
use super::secure::{open_regular, read_limited};

/// A whole file of at most `max` bytes through a no-follow descriptor
/// (a regular file, never a symlink).
pub fn read_member_file(at: InRoot<'_>, kind: &str, max: u64) -> StoreResult<Vec<u8>> {
    let path = at.path();
    let mut file = open_regular(&at, kind, None)?;
    read_limited(&mut file, path, max)?.ok_or_else(|| {
        StoreError::invalid(format!(
            "{kind} {} is larger than {max} bytes",
            path.display()
        ))
    })
}

/// Open a file to read it as a stream (a regular file, never a symlink).
pub fn open_input(at: InRoot<'_>, kind: &str) -> StoreResult<std::fs::File> {
    open_regular(&at, kind, None)
}

/// Size and SHA-256 of a file, streamed.
pub fn file_digest(at: InRoot<'_>, kind: &str) -> StoreResult<(u64, String)> {
    let path = at.path();
    let mut file = open_regular(&at, kind, None)?;
    let mut hasher = Sha256::new();
    let size = std::io::copy(&mut file, &mut hasher).map_err(|e| StoreError::io(&e, path))?;
    Ok((size, hex::encode(hasher.finalize())))
}

impl RunDir {
    /// The receipt's bytes from `start` (a line start) to `byte_length`
    /// cut after every `per` lines: each piece's size and SHA-256, in one streamed pass.
    pub fn receipt_segments(
        &self,
        start: u64,
        byte_length: u64,
        per: u64,
    ) -> StoreResult<Vec<(u64, String)>> {
        use std::io::{Seek, SeekFrom};
        let path = self.receipt_path();
        let mut file = open_regular(&self.root.at(&path), "receipt", None)?;
        file.seek(SeekFrom::Start(start))
            .map_err(|e| StoreError::io(&e, &path))?;
        let mut reader = std::io::BufReader::with_capacity(
            1 << 16,
            file.take(byte_length.saturating_sub(start)),
        );
        let mut out = Vec::new();
        let (mut size, mut lines, mut hasher) = (0u64, 0u64, Sha256::new());
        loop {
            let buf = reader.fill_buf().map_err(|e| StoreError::io(&e, &path))?;
            if buf.is_empty() {
                break;
            }
            let mut used = 0;
            while used < buf.len() {
                let rest = &buf[used..];
                let take = match rest.iter().position(|b| *b == b'\n') {
                    Some(i) => i + 1,
                    None => rest.len(),
                };
                hasher.update(&rest[..take]);
                size += take as u64;
                used += take;
                if rest[take - 1] == b'\n' {
                    lines += 1;
                    if lines == per {
                        out.push((size, hex::encode(hasher.finalize_reset())));
                        size = 0;
                        lines = 0;
                    }
                }
            }
            let n = buf.len();
            reader.consume(n);
        }
        if size > 0 {
            out.push((size, hex::encode(hasher.finalize())));
        }
        Ok(out)
    }

    /// SHA-256 of the receipt's first `byte_length` bytes.
    pub fn receipt_sha256(&self, byte_length: u64) -> StoreResult<String> {
        let path = self.receipt_path();
        let file = open_regular(&self.root.at(&path), "receipt", None)?;
        let mut hasher = Sha256::new();
        let copied = std::io::copy(&mut file.take(byte_length), &mut hasher)
            .map_err(|e| StoreError::io(&e, &path))?;
        if copied != byte_length {
            return Err(StoreError::busy("the receipt changed while it was read"));
        }
        Ok(hex::encode(hasher.finalize()))
    }

    /// The receipt from its start, to be read in pieces.
    pub fn receipt_reader(&self) -> StoreResult<std::fs::File> {
        open_regular(&self.root.at(&self.receipt_path()), "receipt", None)
    }
}
