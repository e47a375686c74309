//! Thread uploads (gateway.md §7): `POST {gateway_url}/api/threads/{id}/uploads` with one
//! multipart part named `files` per file. The answer names where each file landed; the
//! manager references them in the run's human message as `additional_kwargs.files`.
//! `GET …/uploads/limits` tells what one such request may carry ([`UploadLimits`]).

use std::time::Duration;

use bytes::Bytes;

use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde::Deserialize;

use crate::client::{Base, GatewayClient, Owner, read_json};
use crate::error::{CallFamily, GatewayError};
use crate::limits::UploadLimits;

use crate::ThreadId;

/// Total time for an upload call: the bodies are up to tens of megabytes.
pub const UPLOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// A file to upload.
#[derive(Debug, Clone)]
pub struct UploadFile {
    /// The file name to store it under (already safe: no path).
    pub filename: String,
    /// Its MIME type.
    pub mime_type: String,
    /// The content.
    pub bytes: Bytes,
}

/// One stored file as the Gateway reports it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct UploadedFile {
    /// The name it was stored under (the Gateway may have changed it).
    pub filename: String,
    /// Its size in bytes.
    #[serde(default)]
    pub size: u64,
    /// Where the agent sees it (`/mnt/user-data/uploads/<name>`), when reported.
    #[serde(default)]
    pub virtual_path: Option<String>,
}

impl UploadedFile {
    /// Where the agent sees the file: the reported virtual path, else the uploads dir.
    pub fn agent_path(&self) -> String {
        self.virtual_path
            .clone()
            .unwrap_or_else(|| format!("/mnt/user-data/uploads/{}", self.filename))
    }
}

#[derive(Deserialize)]
struct UploadAnswer {
    #[serde(default)]
    files: Vec<UploadedFile>,
}

impl GatewayClient {
    /// What one upload request may carry: `GET {gateway_url}/api/threads/{id}/uploads/limits`,
    /// kept for [`UPLOAD_LIMITS_TTL`](crate::UPLOAD_LIMITS_TTL). A Gateway without the
    /// route applies DeerFlow's defaults ([`UploadLimits::default`]), kept the same way; a
    /// failed read gives the defaults for this call only.
    pub async fn upload_limits(&self, owner: Option<&Owner>, thread: &ThreadId) -> UploadLimits {
        if let Some(limits) = self.upload_limits_cache().fresh() {
            return limits;
        }
        let limits = match self.read_upload_limits(owner, thread).await {
            Ok(limits) => limits.at_least_one(),
            Err(GatewayError::RouteMissing) => UploadLimits::default(),
            Err(error) => {
                tracing::debug!(%error, "Reading the upload limits failed; using the defaults.");
                return UploadLimits::default();
            }
        };
        self.upload_limits_cache().keep(limits);
        limits
    }

    /// `GET …/uploads/limits`, uncached.
    async fn read_upload_limits(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
    ) -> Result<UploadLimits, GatewayError> {
        let url = self.thread_url(Base::Gateway, thread, "/uploads/limits")?;
        let request = self
            .request(Method::GET, &url, owner)?
            .timeout(self.config().request_timeout);
        let response = self
            .send("upload_limits", CallFamily::Plain, request)
            .await?;
        read_json(response, "upload_limits").await
    }

    /// Uploads `files` to the thread's uploads directory; the answer lists the files the
    /// Gateway stored (a name it refused is absent). A request over the
    /// [`upload_limits`](Self::upload_limits) stores nothing and is
    /// `Invalid { status: 413 }`.
    pub async fn upload_files(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
        files: Vec<UploadFile>,
    ) -> Result<Vec<UploadedFile>, GatewayError> {
        let mut form = Form::new();
        for file in files {
            let part = || Part::stream(file.bytes.clone()).file_name(file.filename.clone());
            // A sender's MIME type that does not parse must not sink the other files.
            let part = part()
                .mime_str(&file.mime_type)
                .or_else(|_| part().mime_str("application/octet-stream"))
                .map_err(|_| GatewayError::InvalidArgument { what: "MIME type" })?;
            form = form.part("files", part);
        }
        let url = self.thread_url(Base::Gateway, thread, "/uploads")?;
        let request = self
            .request(Method::POST, &url, owner)?
            .timeout(UPLOAD_TIMEOUT)
            .multipart(form);
        let response = self
            .send("upload_files", CallFamily::Plain, request)
            .await?;
        let answer: UploadAnswer = read_json(response, "upload_files").await?;
        Ok(answer.files)
    }
}
