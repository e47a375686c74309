//! The Gateway's upload limits (`GET /api/threads/{id}/uploads/limits`) and the one entry
//! the client keeps of them.
//!
//! The Gateway refuses a whole upload request over its limits (413) and stores none of its
//! files, so the daemon sends a message's files in requests within them. The limits are the
//! Gateway's configuration, the same for every thread: one entry is kept for
//! [`UPLOAD_LIMITS_TTL`], then read again; a Gateway that answers again after an outage may
//! be another one, so the entry is forgotten then too.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde::Deserialize;
use tokio::time::Instant;

/// How long the Gateway's upload limits are used before they are read again.
pub const UPLOAD_LIMITS_TTL: Duration = Duration::from_secs(600);

/// What one upload request may carry (DeerFlow's `UploadLimits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct UploadLimits {
    /// Files in one request.
    pub max_files: u64,
    /// Bytes of one file.
    pub max_file_size: u64,
    /// Bytes of all the request's files together.
    pub max_total_size: u64,
}

impl Default for UploadLimits {
    /// DeerFlow's defaults (`routers/uploads.py`), which a Gateway without the limits route
    /// applies unless configured otherwise: 10 files, 50 MiB each, 100 MiB in all.
    fn default() -> Self {
        Self {
            max_files: 10,
            max_file_size: 50 * 1024 * 1024,
            max_total_size: 100 * 1024 * 1024,
        }
    }
}

impl UploadLimits {
    /// The limits with every value at least 1 (the Gateway never reports less; a request
    /// always carries one file).
    pub(crate) fn at_least_one(self) -> Self {
        Self {
            max_files: self.max_files.max(1),
            max_file_size: self.max_file_size.max(1),
            max_total_size: self.max_total_size.max(1),
        }
    }
}

/// The last limits read and when; bounded to that one entry.
#[derive(Debug, Default)]
pub(crate) struct LimitsCache {
    entry: Mutex<Option<(Instant, UploadLimits)>>,
}

impl LimitsCache {
    /// The limits kept, if read within [`UPLOAD_LIMITS_TTL`].
    pub(crate) fn fresh(&self) -> Option<UploadLimits> {
        let entry = self.entry.lock().unwrap_or_else(PoisonError::into_inner);
        entry
            .filter(|(read, _)| read.elapsed() < UPLOAD_LIMITS_TTL)
            .map(|(_, limits)| limits)
    }

    /// Keeps `limits`, read now.
    pub(crate) fn keep(&self, limits: UploadLimits) {
        let mut entry = self.entry.lock().unwrap_or_else(PoisonError::into_inner);
        *entry = Some((Instant::now(), limits));
    }

    /// Forgets the entry (the Gateway came back and may be another one).
    pub(crate) fn forget(&self) {
        *self.entry.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn limits_are_kept_for_their_lifetime_then_forgotten() {
        let cache = LimitsCache::default();
        assert_eq!(cache.fresh(), None);
        let limits = UploadLimits {
            max_files: 3,
            ..UploadLimits::default()
        };
        cache.keep(limits);
        tokio::time::advance(UPLOAD_LIMITS_TTL - Duration::from_secs(1)).await;
        assert_eq!(cache.fresh(), Some(limits));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(cache.fresh(), None, "read again after the lifetime");
        cache.keep(limits);
        cache.forget();
        assert_eq!(cache.fresh(), None);
    }
}
