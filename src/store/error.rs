use std::fmt;

/// Why a filesystem operation on the state root was refused or failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// A path, mode, owner or file content breaks the state-root contract
    /// (exit 2).
    Invalid(String),
    /// Another writer holds the state (exit 5, retryable).
    Busy(String),
    /// The operating system refused an operation (exit 2).
    Io(String),
}

impl StoreError {
    pub fn invalid(message: impl Into<String>) -> Self {
        StoreError::Invalid(message.into())
    }

    pub fn busy(message: impl Into<String>) -> Self {
        StoreError::Busy(message.into())
    }

    /// An OS error with the path it concerns, phrased like Python's.
    pub fn io(error: &std::io::Error, path: &std::path::Path) -> Self {
        let errno = error
            .raw_os_error()
            .map(|n| format!("[Errno {n}] "))
            .unwrap_or_default();
        let text = error.to_string();
        let text = text.split(" (os error").next().unwrap_or(&text).to_string();
        StoreError::Io(format!("{errno}{text}: '{}'", path.display()))
    }

    pub fn message(&self) -> &str {
        match self {
            StoreError::Invalid(m) | StoreError::Busy(m) | StoreError::Io(m) => m,
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
