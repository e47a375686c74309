//! Outbound artifacts (gateway.md §7, manager §7.8): the files an agent presents are read
//! back with `GET {gateway_url}/api/threads/{id}/artifacts/{virtual path}` and streamed to a
//! local file under a size bound, so a file is never held whole in memory here.
//!
//! Only virtual paths under [`OUTPUTS_DIR`] are ever requested: anything else (uploads, the
//! workspace, a path with `..`) is refused before a request is made.

use std::path::Path;
use std::time::Duration;

use percent_encoding::utf8_percent_encode;
use reqwest::Method;
use reqwest::header::CONTENT_LENGTH;
use tokio::io::AsyncWriteExt;

use crate::ThreadId;
use crate::client::{Base, GatewayClient, Owner, SEGMENT};
use crate::error::{CallFamily, GatewayError};

/// Where the agent puts the files it presents; the only directory artifacts are read from.
pub const OUTPUTS_DIR: &str = "/mnt/user-data/outputs/";
/// Total time for one artifact download (files are up to tens of megabytes).
pub const ARTIFACT_TIMEOUT: Duration = Duration::from_secs(120);

/// Why an artifact could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// The path is not a file under [`OUTPUTS_DIR`]; nothing was requested.
    #[error("Refused to read an artifact outside the outputs directory.")]
    NotAnOutput,
    /// The file is larger than the bound (said by `Content-Length`, or found while reading).
    #[error("The artifact is larger than {limit} bytes.")]
    TooLarge {
        /// The bound, in bytes.
        limit: u64,
    },
    /// The Gateway's answer (`NotFound` when the file does not exist).
    #[error(transparent)]
    Gateway(#[from] GatewayError),
    /// Writing the local copy failed.
    #[error("Writing the artifact's local copy failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Whether `path` names a file under [`OUTPUTS_DIR`]: a non-empty rest made of segments
/// that are not empty, `.` or `..`, with no backslash or control character.
pub fn is_output_path(path: &str) -> bool {
    let Some(rest) = path.strip_prefix(OUTPUTS_DIR) else {
        return false;
    };
    !rest.is_empty()
        && !rest.chars().any(|c| c == '\\' || c.is_control())
        && rest
            .split('/')
            .all(|segment| !matches!(segment, "" | "." | ".."))
}

impl GatewayClient {
    /// Downloads the artifact at virtual `path` of `thread` into `dest` (created or
    /// truncated), refusing more than `max_bytes`; returns its size. On any error `dest`
    /// may hold a partial file: the caller's staging directory owns it.
    pub async fn download_artifact(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
        path: &str,
        max_bytes: u64,
        dest: &Path,
    ) -> Result<u64, ArtifactError> {
        if !is_output_path(path) {
            return Err(ArtifactError::NotAnOutput);
        }
        let encoded: Vec<String> = path
            .trim_start_matches('/')
            .split('/')
            .map(|segment| utf8_percent_encode(segment, SEGMENT).to_string())
            .collect();
        let url = self.thread_url(
            Base::Gateway,
            thread,
            &format!("/artifacts/{}", encoded.join("/")),
        )?;
        let request = self
            .request(Method::GET, &url, owner)?
            .timeout(ARTIFACT_TIMEOUT);
        let mut response = self
            .send("download_artifact", CallFamily::Plain, request)
            .await?;
        let declared = response
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|size| size > max_bytes) {
            return Err(ArtifactError::TooLarge { limit: max_bytes });
        }
        let mut file = tokio::fs::File::create(dest).await?;
        let mut size: u64 = 0;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| GatewayError::from_reqwest(error, "download_artifact"))?
        {
            size = size.saturating_add(chunk.len() as u64);
            if size > max_bytes {
                return Err(ArtifactError::TooLarge { limit: max_bytes });
            }
            file.write_all(&chunk).await?;
        }
        file.flush().await?;
        Ok(size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_files_under_the_outputs_directory_are_outputs() {
        for ok in [
            "/mnt/user-data/outputs/report.pdf",
            "/mnt/user-data/outputs/charts/q3 chart.png",
            "/mnt/user-data/outputs/报告.md",
        ] {
            assert!(is_output_path(ok), "{ok}");
        }
        for refused in [
            "/mnt/user-data/outputs/",
            "/mnt/user-data/outputs",
            "/mnt/user-data/uploads/secret.txt",
            "/mnt/user-data/outputs/../uploads/secret.txt",
            "/mnt/user-data/outputs/./a",
            "/mnt/user-data/outputs//a",
            "/mnt/user-data/outputs/a\\..\\b",
            "/mnt/user-data/outputs/a\u{0}b",
            "mnt/user-data/outputs/a",
            "/etc/passwd",
        ] {
            assert!(!is_output_path(refused), "{refused:?}");
        }
    }
}
