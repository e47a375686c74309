//! Reading a platform's response, for every adapter's HTTP client: its body under a size
//! bound, and a header that names a number of seconds (a rate limit's wait); and reading a
//! staged file to upload under the platform's bound.

use std::path::Path;
use std::time::Duration;

use axum::http::HeaderMap;
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tokio::io::AsyncReadExt;

use crate::error::{ChannelError, ChannelResult};

/// Why a bounded read stopped.
#[derive(Debug)]
pub enum BoundedRead<E> {
    /// More than the bound (said by the declared length, or found while reading).
    TooLarge,
    /// The body could not be read.
    Failed(E),
}

impl<E> BoundedRead<E> {
    /// The caller's own error: `too_large()` for [`TooLarge`](Self::TooLarge),
    /// `failed(e)` for [`Failed`](Self::Failed).
    pub fn into_error<F>(self, too_large: impl FnOnce() -> F, failed: impl FnOnce(E) -> F) -> F {
        match self {
            Self::TooLarge => too_large(),
            Self::Failed(e) => failed(e),
        }
    }
}

/// The bytes of a staged file to upload (an [`OutboundFile`](crate::OutboundFile)'s
/// path), refused with [`ChannelError::TooLarge`] once there are more than `max`: by its
/// size on disk before any byte is read (the size the agent declared may be stale), and
/// again while reading (a file that grew meanwhile is never read past the bound).
pub async fn read_staged(path: &Path, max: u64) -> ChannelResult<Vec<u8>> {
    let file = tokio::fs::File::open(path).await?;
    let size = file.metadata().await?.len();
    if size > max {
        return Err(ChannelError::TooLarge { limit: max });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or_default());
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .await?;
    if bytes.len() as u64 > max {
        return Err(ChannelError::TooLarge { limit: max });
    }
    Ok(bytes)
}

/// Collects `body` (a response's chunks, e.g. reqwest's `bytes_stream()`), refused once it
/// is over `max` bytes: by the `declared` length before any byte is read, otherwise as soon
/// as the bytes read pass the bound (never more than the bound plus one chunk is held).
pub async fn read_bounded<S, E>(
    body: S,
    declared: Option<u64>,
    max: u64,
) -> Result<Vec<u8>, BoundedRead<E>>
where
    S: Stream<Item = Result<Bytes, E>>,
{
    if declared.is_some_and(|n| n > max) {
        return Err(BoundedRead::TooLarge);
    }
    let capacity = declared.map_or(0, |n| usize::try_from(n).unwrap_or(0));
    let mut out = Vec::with_capacity(capacity);
    let mut body = std::pin::pin!(body);
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(BoundedRead::Failed)?;
        if (out.len() + chunk.len()) as u64 > max {
            return Err(BoundedRead::TooLarge);
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// The header `name` as whole seconds (`Retry-After: 7`, Feishu's
/// `x-ogw-ratelimit-reset: 7`); `None` when absent or not a whole number.
pub fn header_seconds(headers: &HeaderMap, name: &str) -> Option<Duration> {
    let value = headers.get(name)?.to_str().ok()?;
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(parts: &[&'static [u8]]) -> impl Stream<Item = Result<Bytes, ()>> {
        futures_util::stream::iter(
            parts
                .iter()
                .map(|p| Ok(Bytes::from_static(p)))
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn a_seconds_header_is_a_whole_number() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", " 7 ".parse().unwrap());
        headers.insert("x-other", "soon".parse().unwrap());
        assert_eq!(
            header_seconds(&headers, "retry-after"),
            Some(Duration::from_secs(7))
        );
        assert_eq!(header_seconds(&headers, "x-other"), None);
        assert_eq!(header_seconds(&headers, "absent"), None);
    }

    #[tokio::test]
    async fn the_bound_holds_by_declaration_and_while_reading() {
        assert_eq!(
            read_bounded(chunks(&[b"ab", b"cd"]), Some(4), 4)
                .await
                .unwrap(),
            b"abcd"
        );
        assert!(matches!(
            read_bounded(chunks(&[b"ab"]), Some(5), 4).await,
            Err(BoundedRead::TooLarge)
        ));
        assert!(matches!(
            read_bounded(chunks(&[b"abc", b"de"]), None, 4).await,
            Err(BoundedRead::TooLarge)
        ));
        let failing = futures_util::stream::iter(vec![Ok(Bytes::from_static(b"a")), Err("reset")]);
        let failed = read_bounded(failing, None, 4).await.unwrap_err();
        assert!(matches!(failed, BoundedRead::Failed("reset")));
        assert_eq!(
            failed.into_error(|| "big".to_owned(), |e| format!("failed: {e}")),
            "failed: reset"
        );
        let big = BoundedRead::<()>::TooLarge.into_error(|| "big", |_| "failed");
        assert_eq!(big, "big");
    }

    #[tokio::test]
    async fn a_staged_file_is_read_within_its_bound_and_refused_past_it() {
        let dir = std::env::temp_dir().join(format!("im-bridge-staged-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ten.bin");
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read_staged(&path, 10).await.unwrap(), b"0123456789");
        let refused = read_staged(&path, 9).await;
        assert!(
            matches!(refused, Err(ChannelError::TooLarge { limit: 9 })),
            "{refused:?}"
        );
        let gone = read_staged(&dir.join("gone.bin"), 10).await;
        assert!(matches!(gone, Err(ChannelError::Io(_))), "{gone:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
