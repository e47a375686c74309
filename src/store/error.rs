//! `StoreError`: every way a store call or a store open can fail, with typed context.
//!
//! Open-time failures name the file (or the Postgres server, without its password), so a
//! corrupt, locked, unreachable or too-new store is a clear startup error instead of a
//! silent reset. Call-time failures name the operation. `Display` strings
//! are for logs: they hold paths, operation names and SQLite's own diagnostics, never a
//! message text (the store never sees one) and never a credential.

use std::path::PathBuf;
use std::sync::Arc;

/// A failed store open or store call.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store file cannot be opened or read: missing directory, no permission, not a
    /// database (garbage or a different file format), or failed its integrity check.
    #[error("Cannot open the store file {path}: {reason}.", path = path.display())]
    Open {
        /// The store file.
        path: PathBuf,
        /// What went wrong, from the operating system or SQLite.
        reason: String,
    },
    /// Another process (or another open store in this process) holds the file. Two daemons
    /// writing one SQLite store would each admit a redelivered message, so this is refused;
    /// several replicas share Postgres instead.
    #[error("The store file {path} is in use by another im-bridge process.", path = path.display())]
    Locked {
        /// The store file.
        path: PathBuf,
    },
    /// The file was written by a newer im-bridge (its schema version is ahead of this
    /// build). Refused so an older binary never rewrites a schema it does not understand.
    #[error(
        "The store file {path} has schema version {found}, newer than the {supported} this build supports; upgrade im-bridge or point it at another file.",
        path = path.display()
    )]
    TooNew {
        /// The store file.
        path: PathBuf,
        /// The schema version found in the file.
        found: i64,
        /// The newest schema version this build knows.
        supported: i64,
    },
    /// Applying an embedded schema migration failed; the file keeps its previous version.
    #[error("Cannot migrate the store file {path} to schema version {version}: {source}.", path = path.display())]
    Migration {
        /// The store file.
        path: PathBuf,
        /// The schema version being applied.
        version: i64,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// A store operation failed after a successful open (disk full, I/O error, corruption
    /// found on a page read at run time), or the transaction it shared with other operations
    /// failed to commit; either way it had no effect.
    #[error("Store operation {op} failed: {source}.")]
    Query {
        /// The trait method that failed, e.g. `dedupe_admit`.
        op: &'static str,
        /// SQLite's error; shared because one failed commit fails every operation in it.
        #[source]
        source: Arc<rusqlite::Error>,
    },
    /// The Postgres store cannot be reached or refused the connection (wrong host,
    /// credentials, database, or a URL this build cannot use).
    #[error("Cannot connect to the store at {target}: {reason}.")]
    Connect {
        /// `postgres://user@host:port/db`, never the password.
        target: String,
        /// What went wrong.
        reason: String,
    },
    /// The Postgres schema was written by a newer im-bridge (see [`StoreError::TooNew`]).
    #[error(
        "The store at {target} has schema version {found}, newer than the {supported} this build supports; upgrade im-bridge."
    )]
    TooNewSchema {
        /// `postgres://user@host:port/db`.
        target: String,
        /// The schema version found.
        found: i64,
        /// The newest schema version this build knows.
        supported: i64,
    },
    /// A Postgres statement failed (the operation had no effect).
    #[error("Store operation {op} failed: {source}.")]
    Postgres {
        /// The trait method (or `migrate`) that failed.
        op: &'static str,
        /// The driver's error (it never holds the password).
        #[source]
        source: tokio_postgres::Error,
    },
    /// A call to a shared store got no answer in time (the server or the network is
    /// stuck); the operation may or may not have taken effect.
    #[error("Store operation {op} got no answer in time.")]
    TimedOut {
        /// The trait method (or `migrate`) that timed out.
        op: &'static str,
    },
    /// The store was closed (or its worker stopped); no further calls are served.
    #[error("The store is closed.")]
    Closed,
    /// A channel-state key or value is outside the bounds ([`super::STATE_KEY_MAX`],
    /// [`super::STATE_VALUE_MAX`]); nothing was written.
    #[error(
        "Store operation {op} refused a key of {key} bytes or a value of {value} bytes: out of bounds."
    )]
    OutOfBounds {
        /// The trait method.
        op: &'static str,
        /// The key's length in bytes.
        key: usize,
        /// The value's length in bytes (0 for a read).
        value: usize,
    },
}
