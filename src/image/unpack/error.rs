//! Why applying a layer failed: one line, naming the tar entry.

use std::io;
use std::path::PathBuf;

use super::names::Shown;
use super::tarread::TarError;
use super::META_MAX;

/// Why applying a layer failed; one line, naming the tar entry.
#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    #[error("layer entry {entry}: refused: {why}")]
    Unsafe { entry: String, why: String },
    #[error("layer entry {entry}: {op}")]
    Io {
        entry: String,
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("layer entry {entry}: more than {limit} bytes of file content")]
    TooLarge { entry: String, limit: u64 },
    #[error("layer entry {entry}: appears twice in this layer")]
    Duplicate { entry: String },
    #[error("layer entry {entry}: more than {limit} entries")]
    TooManyEntries { entry: String, limit: u64 },
    #[error("layer tar truncated at {at}: {why}")]
    Truncated { at: String, why: String },
    #[error("layer tar unreadable at {at}")]
    Tar {
        at: String,
        #[source]
        source: io::Error,
    },
    #[error("rootfs {path}")]
    Root {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// From `apply_layers`: which layer (1-based) failed. The message
    /// holds the layer's whole error, causes included, so it is no source.
    #[error("layer {index}: {}", crate::error::Chain(&**.err))]
    Layer { index: usize, err: Box<UnpackError> },
}

impl UnpackError {
    /// The error itself, without `Layer` wrappers.
    pub fn innermost(&self) -> &UnpackError {
        match self {
            UnpackError::Layer { err, .. } => err.innermost(),
            e => e,
        }
    }
}

pub(super) fn unsafe_err(entry: Shown<'_>, why: impl Into<String>) -> UnpackError {
    UnpackError::Unsafe {
        entry: entry.to_string(),
        why: why.into(),
    }
}

pub(super) fn io_err<'a>(
    entry: Shown<'a>,
    op: &'static str,
) -> impl FnOnce(io::Error) -> UnpackError + 'a {
    move |source| UnpackError::Io {
        entry: entry.to_string(),
        op,
        source,
    }
}

/// A tar stream error as an unpack error at `at`.
pub(super) fn tar_error(err: TarError, at: String) -> UnpackError {
    match err {
        TarError::Truncated(what) => UnpackError::Truncated {
            at,
            why: format!("the stream ends inside {what}"),
        },
        TarError::Bad(why) => UnpackError::Tar {
            at,
            source: io::Error::other(why),
        },
        TarError::TooLarge => UnpackError::Tar {
            at,
            source: io::Error::other(format!(
                "tar extension headers too large (over {META_MAX} bytes for one entry)"
            )),
        },
        TarError::Io(source) => UnpackError::Tar { at, source },
    }
}
