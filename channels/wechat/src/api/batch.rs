//! A `getupdates` answer read under its bound, and one over it read as a stream.
//!
//! A batch over [`MAX_POLL_ANSWER`](super::MAX_POLL_ANSWER) cannot be kept whole, and
//! refusing it would stall the channel: the cursor would not move, and iLink would answer
//! the same batch to every poll. iLink's cursor is opaque, so the poll cannot move part-way
//! through a batch either. So such an answer is read on as a stream (up to
//! [`MAX_SKIPPED_BYTES`], within the poll's timeout) through a [`Scan`], which keeps its
//! top-level `get_updates_buf` and each ordinary message of its top-level `msgs` (one over
//! [`MAX_MESSAGE_BYTES`](scan::MAX_MESSAGE_BYTES), usually the one element that made the
//! batch large, is counted and skipped): with the cursor, the poll admits what was kept
//! and moves past the batch ([`Batch::Streamed`]); without it (none found, or the answer
//! is past even that bound) it fails as before. An answer within the bound is never
//! scanned. The cursor is never logged.
//!
//! Child `scan`: the structural scanner and its bounds.

pub mod scan;

use im_bridge_channel::http::HttpError;

pub use scan::Found;
use scan::Scan;

/// The most bytes read of an oversized answer; past it the poll fails as an oversized
/// answer always did.
pub const MAX_SKIPPED_BYTES: u64 = 64 * 1024 * 1024;

/// A `getupdates` answer's body.
#[derive(Debug)]
pub enum Batch {
    /// The whole body, within the bound.
    Whole(Vec<u8>),
    /// Over the bound, read as a stream: how many bytes it had, the cursor after it and
    /// its messages, kept and skipped.
    Streamed {
        /// The answer's length.
        bytes: u64,
        /// Its top-level `get_updates_buf`.
        cursor: String,
        /// Its messages (`found.cursor` is taken).
        found: Found,
    },
}

/// Reads `response`'s body for `op`: whole when at most `max` bytes, else scanned for its
/// cursor and messages (what was read so far first, then the rest as it comes). An
/// oversized answer without a readable cursor is the kit's oversized-answer error.
pub async fn read(
    op: &'static str,
    mut response: reqwest::Response,
    max: u64,
) -> Result<Batch, HttpError> {
    let too_large = || HttpError::decode(op, format!("the answer exceeds {max} bytes"));
    let mut kept = Vec::new();
    let mut scan: Option<Scan> = None;
    let mut bytes: u64 = 0;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| HttpError::transport(op, e))?
    {
        bytes += chunk.len() as u64;
        if bytes > MAX_SKIPPED_BYTES {
            return Err(too_large());
        }
        match &mut scan {
            Some(scan) => scan.feed(&chunk),
            None if bytes <= max => kept.extend_from_slice(&chunk),
            None => {
                let mut started = Scan::default();
                started.feed(&std::mem::take(&mut kept));
                started.feed(&chunk);
                scan = Some(started);
            }
        }
    }
    let Some(scan) = scan else {
        return Ok(Batch::Whole(kept));
    };
    let mut found = scan.into_found();
    let cursor = found.cursor.take().ok_or_else(too_large)?;
    Ok(Batch::Streamed {
        bytes,
        cursor,
        found,
    })
}
