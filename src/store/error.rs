use nix::libc;
use std::fmt;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// Why a filesystem operation on the state root was refused or failed.
/// Control flow looks at the variant and, for [`StoreError::Io`], at the
/// error's kind and errno, never at the message text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// A path, file type or file content breaks the state-root contract
    /// (exit 2).
    Invalid(String),
    /// A file or directory has the wrong owner or mode (exit 2).
    Insecure(String),
    /// Another writer holds the state (exit 5, retryable).
    Busy(String),
    /// Another writer holds (or is taking, or reclaiming) the receipt's
    /// directory lock (exit 5, retryable; a command waits a moment first).
    LockHeld(String),
    /// The operating system refused or failed an operation (see
    /// [`IoFailure::is_transient`] for the exit status).
    Io(IoFailure),
    /// The run directory we opened is no longer the one its path names: it
    /// was moved away or replaced (by a symlink, say) while we waited for
    /// its lock (exit 2, nothing written).
    Moved(String),
}

/// An OS error, with the path it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoFailure {
    pub kind: ErrorKind,
    pub errno: Option<i32>,
    pub path: PathBuf,
    /// The message, rendered once: `text: 'path' (ENAME)`.
    message: String,
}

impl IoFailure {
    /// The errno's name (`ENOSPC`), when the OS gave one.
    pub fn errno_name(&self) -> Option<String> {
        self.errno
            .map(|n| format!("{:?}", nix::errno::Errno::from_raw(n)))
    }

    /// A resource or device failure that may pass (a full disk or quota,
    /// EIO, an interrupted or busy call): nothing was acknowledged, so
    /// the caller may retry once it is fixed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::StorageFull
                | ErrorKind::QuotaExceeded
                | ErrorKind::Interrupted
                | ErrorKind::WouldBlock
                | ErrorKind::TimedOut
                | ErrorKind::ResourceBusy
                | ErrorKind::OutOfMemory
        ) || matches!(
            self.errno,
            Some(libc::EIO | libc::ENOSPC | libc::EDQUOT | libc::ENFILE | libc::EMFILE)
        )
    }
}

impl StoreError {
    pub fn invalid(message: impl Into<String>) -> Self {
        StoreError::Invalid(message.into())
    }

    pub fn busy(message: impl Into<String>) -> Self {
        StoreError::Busy(message.into())
    }

    pub fn lock_held(message: impl Into<String>) -> Self {
        StoreError::LockHeld(message.into())
    }

    /// An OS error with the path it concerns.
    pub fn io(error: &std::io::Error, path: &Path) -> Self {
        let errno = error.raw_os_error();
        let text = error.to_string();
        let text = text.split(" (os error").next().unwrap_or(&text).to_string();
        // The OS's own words, the path, then the errno's name (ENOSPC), not
        // Python's `[Errno 28]` prefix (DEVIATIONS 49).
        let mut failure = IoFailure {
            kind: error.kind(),
            errno,
            path: path.to_path_buf(),
            message: String::new(),
        };
        let name = failure
            .errno_name()
            .map(|name| format!(" ({name})"))
            .unwrap_or_default();
        failure.message = format!("{text}: '{}'{name}", path.display());
        StoreError::Io(failure)
    }

    /// An I/O failure that is ours to describe (a short read, say).
    pub fn io_other(path: &Path, what: &str) -> Self {
        StoreError::Io(IoFailure {
            kind: ErrorKind::Other,
            errno: None,
            path: path.to_path_buf(),
            message: format!("{}: {what}", path.display()),
        })
    }

    /// The same refusal said of `what` (`head file refused: <why>`): the
    /// kind, and so the exit status, retryability and hint, stays.
    pub fn refused(self, what: &str) -> Self {
        let said = |m: String| format!("{what} refused: {m}");
        match self {
            StoreError::Invalid(m) => StoreError::Invalid(said(m)),
            StoreError::Insecure(m) => StoreError::Insecure(said(m)),
            StoreError::Busy(m) => StoreError::Busy(said(m)),
            StoreError::LockHeld(m) => StoreError::LockHeld(said(m)),
            StoreError::Moved(m) => StoreError::Moved(said(m)),
            StoreError::Io(failure) => StoreError::Io(IoFailure {
                message: said(failure.message),
                ..failure
            }),
        }
    }

    /// The kind of an I/O failure (`None` for the other variants).
    pub fn io_kind(&self) -> Option<ErrorKind> {
        match self {
            StoreError::Io(failure) => Some(failure.kind),
            _ => None,
        }
    }

    /// Whether trying again may help: another writer holds the state, or
    /// the OS failure may pass (DEVIATIONS 49); nothing was acknowledged.
    pub fn is_retryable(&self) -> bool {
        match self {
            StoreError::Busy(_) | StoreError::LockHeld(_) => true,
            StoreError::Io(failure) => failure.is_transient(),
            StoreError::Invalid(_) | StoreError::Insecure(_) | StoreError::Moved(_) => false,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            StoreError::Invalid(m)
            | StoreError::Insecure(m)
            | StoreError::Busy(m)
            | StoreError::LockHeld(m)
            | StoreError::Moved(m) => m,
            StoreError::Io(failure) => &failure.message,
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for StoreError {}

pub type StoreResult<T> = Result<T, StoreError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_os_error_keeps_its_kind_and_path_and_reads_as_an_os_error() {
        let e = StoreError::io(
            &std::io::Error::from_raw_os_error(libc::ENOSPC),
            Path::new("/s/runs/r/receipt.jsonl"),
        );
        assert_eq!(e.io_kind(), Some(ErrorKind::StorageFull));
        assert_eq!(
            e.message(),
            "No space left on device: '/s/runs/r/receipt.jsonl' (ENOSPC)"
        );
        let StoreError::Io(failure) = &e else {
            unreachable!()
        };
        assert!(failure.is_transient());
        assert_eq!(failure.path, Path::new("/s/runs/r/receipt.jsonl"));
        let eio = StoreError::io(
            &std::io::Error::from_raw_os_error(libc::EIO),
            Path::new("x"),
        );
        assert!(matches!(&eio, StoreError::Io(f) if f.is_transient()));
        let enoent = StoreError::io(
            &std::io::Error::from_raw_os_error(libc::ENOENT),
            Path::new("x"),
        );
        assert!(matches!(&enoent, StoreError::Io(f) if !f.is_transient()));
    }

    #[test]
    fn a_refusal_said_of_a_file_keeps_its_kind() {
        let full = StoreError::io(
            &std::io::Error::from_raw_os_error(libc::ENOSPC),
            Path::new("k"),
        )
        .refused("signer key file");
        assert_eq!(
            full.message(),
            "signer key file refused: No space left on device: 'k' (ENOSPC)"
        );
        assert!(full.is_retryable() && full.io_kind() == Some(ErrorKind::StorageFull));
        let loose = StoreError::Insecure("mode 0644".into()).refused("head file");
        assert_eq!(
            loose,
            StoreError::Insecure("head file refused: mode 0644".into())
        );
    }
}
