//! Fresh uuid4 values (owner and lock tokens, run-id suffixes, temporary
//! names) from the kernel's `getrandom` system call.
//!
//! The `getrandom` crate finds glibc's `getrandom` through a weak symbol,
//! which a static binary (build.rs) does not resolve; it then opens and
//! polls `/dev/random` and reads `/dev/urandom`, six calls and two opens of
//! every mutation. The system call itself is one; the crate stays the
//! fallback where it fails (a kernel before 3.17, a seccomp filter).

/// A random (version 4) uuid.
pub fn uuid4() -> uuid::Uuid {
    let mut bytes = [0u8; 16];
    // SAFETY: the kernel writes at most `bytes.len()` bytes into the buffer.
    let filled = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if filled == bytes.len() as isize {
        uuid::Builder::from_random_bytes(bytes).into_uuid()
    } else {
        uuid::Uuid::new_v4()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn uuid4_values_are_version_4_and_differ() {
        let (a, b) = (super::uuid4(), super::uuid4());
        assert_eq!(a.get_version_num(), 4);
        assert_eq!(a.get_variant(), uuid::Variant::RFC4122);
        assert_ne!(a, b);
    }
}
