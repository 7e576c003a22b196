//! Why a node's bucket could not be opened.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("TLS: {0}")]
    Tls(#[source] crate::tls::TlsError),
    #[error("opening the index store in {}: {source}", dir.display())]
    Index {
        dir: PathBuf,
        #[source]
        source: sluice_index::IndexError,
    },
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing {}: {source}", path.display())]
    Identity {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "{} was created with --vbuckets {had}, not {asked}: keys would hash to other vbuckets",
        dir.display()
    )]
    VbucketsChanged { dir: PathBuf, had: u16, asked: u16 },
    #[error("{} holds a {had} bucket, not {asked}", dir.display())]
    TypeChanged {
        dir: PathBuf,
        had: String,
        asked: &'static str,
    },
    #[error("opening storage in {}: {source}", dir.display())]
    Storage {
        dir: PathBuf,
        #[source]
        source: sluice_storage::StoreError,
    },
    #[error("warming up the bucket: {0}")]
    Warmup(#[source] sluice_engine::EngineError),
    #[error("creating the administrator's credentials: {0}")]
    Credentials(#[source] crate::credentials::UserError),
}
