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

/// The name a file called `name` is first written under, beside it, before
/// it is renamed or linked into place: hidden, unique, and ending in `.tmp`
/// (what `doctor` and `litter` recognise as a left-over temporary).
pub fn temp_name(name: &str) -> String {
    format!(".{name}.{}.tmp", &uuid4().simple().to_string()[..8])
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

    #[test]
    fn a_temporary_name_is_hidden_unique_and_ends_in_tmp() {
        let (a, b) = (super::temp_name("run.json"), super::temp_name("run.json"));
        assert!(a.starts_with(".run.json.") && a.ends_with(".tmp"), "{a}");
        assert_eq!(a.len(), ".run.json.".len() + 8 + ".tmp".len());
        assert_ne!(a, b);
    }
}
