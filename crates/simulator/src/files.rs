//! Thread files per user (`spec/gateway.md` §7): uploads (`POST …/uploads`, within the
//! limits `GET …/uploads/limits` reports), the files an agent writes, and the artifacts
//! route that reads both (`GET …/artifacts/{path}`). An upload replaces an earlier one of
//! the same name, as the Gateway's `os.replace` does.
//!
//! The Gateway keeps a thread's files under `users/<user>/threads/<thread>/user-data/`, where
//! `<user>` is the user the call acts for: the owner header made safe
//! (`make_safe_user_id`), or `default`. A run writes under its `context.user_id` (else the
//! caller's user). So an upload, the run that reads it, and the artifact fetch of what the
//! run wrote only meet when every call of a conversation acts for the same user; the store
//! here (the state's `Files`, `state/files.rs`) is keyed the same way, `(user, thread,
//! virtual path)`.

use axum::body::Body;
use axum::extract::Multipart;
use axum::http::{StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

use crate::call::{ItemCall, ThreadCall};
use crate::fault::Route;
use crate::{UploadLimits, wire};

/// The virtual root every thread path lives under.
const USER_DATA: &str = "mnt/user-data";

/// The file name the Gateway stores an upload as (`normalize_filename`: the base name;
/// `None` when empty, `.`/`..`, with a backslash, or over 255 bytes: skipped).
fn upload_name(raw: &str) -> Option<String> {
    let base = raw.rsplit('/').find(|s| !s.is_empty()).unwrap_or_default();
    let unsafe_name =
        base.is_empty() || base == "." || base == ".." || base.contains('\\') || base.len() > 255;
    (!unsafe_name).then(|| base.to_owned())
}

/// `name`, or `stem_N.ext` with the smallest `N` not in `seen` (`claim_unique_filename`).
fn claim_unique(name: String, seen: &mut Vec<String>) -> String {
    if !seen.contains(&name) {
        seen.push(name.clone());
        return name;
    }
    let (stem, ext) = match name.rfind('.') {
        Some(i) if i > 0 => (&name[..i], &name[i..]),
        _ => (name.as_str(), ""),
    };
    let unique = (1..)
        .map(|n| format!("{stem}_{n}{ext}"))
        .find(|c| !seen.contains(c))
        .unwrap_or_default();
    seen.push(unique.clone());
    unique
}

/// `GET /api/threads/{id}/uploads/limits`: the configured [`UploadLimits`], with the
/// upload route's owner check.
pub(crate) async fn limits(call: ThreadCall) -> Result<Response, Response> {
    call.exists()?;
    let limits = call.sim.state().config.upload_limits;
    Ok(wire::json_response(
        StatusCode::OK,
        json!({
            "max_files": limits.max_files,
            "max_file_size": limits.max_file_size,
            "max_total_size": limits.max_total_size,
        }),
    ))
}

/// The Gateway's 413 for an upload over `limits` (checked in its order: the number of
/// parts, then each file's size and the running total), which stores none of the files.
fn over_limits(
    limits: &UploadLimits,
    count: usize,
    parts: &[(String, axum::body::Bytes)],
) -> Result<(), Response> {
    let too_large = |detail: String| wire::detail(StatusCode::PAYLOAD_TOO_LARGE, detail);
    if count > limits.max_files {
        return Err(too_large(format!(
            "Too many files: maximum is {}",
            limits.max_files
        )));
    }
    let mut total = 0;
    for (name, bytes) in parts {
        let size = bytes.len() as u64;
        total += size;
        if size > limits.max_file_size {
            return Err(too_large(format!("File too large: {name}")));
        }
        if total > limits.max_total_size {
            return Err(too_large("Total upload size too large".to_owned()));
        }
    }
    Ok(())
}

/// `POST /api/threads/{id}/uploads` (§7): multipart field `files`, one part per file, stored
/// in the caller's area. Like the Gateway (`require_existing=False`), a thread nobody
/// created yet takes uploads; another owner's thread is a 404. A request over the
/// [`UploadLimits`] is 413 and stores nothing.
pub(crate) async fn upload(call: ThreadCall, mut form: Multipart) -> Result<Response, Response> {
    call.exists()?;
    call.fault(Route::Uploads).await?;
    let invalid = || wire::detail(StatusCode::BAD_REQUEST, "Invalid multipart body");
    let (mut parts, mut skipped) = (Vec::new(), Vec::new());
    let mut count = 0;
    while let Some(field) = form.next_field().await.map_err(|_| invalid())? {
        if field.name() != Some("files") {
            continue;
        }
        count += 1;
        let raw = field.file_name().unwrap_or_default().to_owned();
        let bytes = field.bytes().await.map_err(|_| invalid())?;
        match upload_name(&raw) {
            Some(name) => parts.push((name, bytes)),
            None if raw.is_empty() => {}
            None => skipped.push(raw),
        }
    }
    if count == 0 {
        return Err(wire::validation(vec![wire::validation_entry(
            "missing",
            json!(["body", "files"]),
            "Field required",
            Value::Null,
            None,
        )]));
    }
    let limits = call.sim.state().config.upload_limits;
    over_limits(&limits, count, &parts)?;
    let (thread_id, user) = (call.thread_id.clone(), call.caller.user_id());
    let mut seen = Vec::new();
    let mut described = Vec::new();
    {
        let mut state = call.sim.state();
        for (original, bytes) in parts {
            let name = claim_unique(original.clone(), &mut seen);
            let virtual_path = format!("/mnt/user-data/uploads/{name}");
            described.push(json!({
                "filename": name, "size": bytes.len(),
                "path": format!("/srv/deer-flow/users/{user}/threads/{thread_id}/user-data/uploads/{name}"),
                "virtual_path": virtual_path,
                "artifact_url": format!("/api/threads/{thread_id}/artifacts/mnt/user-data/uploads/{name}"),
                "extension": null, "modified": null,
                "original_filename": (name != original).then_some(original),
                "markdown_file": null, "markdown_path": null, "markdown_virtual_path": null,
                "markdown_artifact_url": null,
            }));
            state.files.put(&user, &thread_id, &virtual_path, bytes);
        }
    }
    call.sim.bump();
    Ok(wire::json_response(
        StatusCode::OK,
        json!({
            "success": true,
            "message": format!("Successfully uploaded {} file(s)", described.len()),
            "files": described,
            "skipped_files": skipped,
        }),
    ))
}

/// The virtual path of an artifact route's `path`, or the Gateway's refusal: 400 outside
/// `/mnt/user-data`, 403 for a `..` that climbs out of it.
fn resolve(path: &str) -> Result<String, Response> {
    let stripped = path.trim_start_matches('/');
    let inside = stripped == USER_DATA || stripped.starts_with(&format!("{USER_DATA}/"));
    if !inside {
        return Err(wire::detail(
            StatusCode::BAD_REQUEST,
            "Path must start with /mnt/user-data",
        ));
    }
    let mut segments: Vec<&str> = Vec::new();
    for segment in stripped[USER_DATA.len()..].split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                if segments.pop().is_none() {
                    return Err(wire::detail(
                        StatusCode::FORBIDDEN,
                        "Access denied: path traversal detected",
                    ));
                }
            }
            s => segments.push(s),
        }
    }
    Ok(format!("/{USER_DATA}/{}", segments.join("/")))
}

/// The content type the Gateway's `mimetypes` guess gives a file name (text types carry
/// `charset=utf-8`), for the names tests use; other names are `application/octet-stream`.
fn content_type(name: &str) -> &'static str {
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("txt" | "log") => "text/plain; charset=utf-8",
        Some("md") => "text/markdown; charset=utf-8",
        Some("csv") => "text/csv; charset=utf-8",
        Some("html" | "htm") => "text/html; charset=utf-8",
        Some("json") => "application/json",
        Some("pdf") => "application/pdf",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("svg") => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

/// `GET /api/threads/{id}/artifacts/{path}` (§7): the file at `path` in the caller's area of
/// the thread, or 404 `Artifact not found: <path as asked>`. Active content (HTML, SVG) is
/// sent as an attachment, everything else inline, as the Gateway does.
pub(crate) async fn artifact(
    ItemCall { call, item: path }: ItemCall,
) -> Result<Response, Response> {
    call.exists()?;
    let virtual_path = resolve(&path)?;
    let bytes = {
        let state = call.sim.state();
        let user = call.caller.user_id();
        state.files.get(&user, &call.thread_id, &virtual_path)
    };
    let Some(bytes) = bytes else {
        return Err(wire::detail(
            StatusCode::NOT_FOUND,
            format!("Artifact not found: {path}"),
        ));
    };
    let name = virtual_path.rsplit('/').next().unwrap_or_default();
    let kind = content_type(name);
    let active = kind.starts_with("text/html") || kind == "image/svg+xml";
    let disposition = format!(
        "{}; filename*=UTF-8''{}",
        if active { "attachment" } else { "inline" },
        percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC)
    );
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, kind)
        .header(header::CONTENT_DISPOSITION, disposition)
        .body(Body::from(bytes))
        .map_err(|_| wire::detail(StatusCode::INTERNAL_SERVER_ERROR, "response"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upload_names_are_base_names_made_unique() {
        assert_eq!(upload_name("../evil.txt").as_deref(), Some("evil.txt"));
        assert_eq!(upload_name("a/b/"), Some("b".to_owned()));
        for bad in ["", "..", ".", "a\\b", &"x".repeat(256)] {
            assert_eq!(upload_name(bad), None, "{bad}");
        }
        let mut seen = Vec::new();
        let names: Vec<String> = ["a.txt", "a.txt", "a.txt", "b"]
            .into_iter()
            .map(|n| claim_unique(n.to_owned(), &mut seen))
            .collect();
        assert_eq!(names, ["a.txt", "a_1.txt", "a_2.txt", "b"]);
    }

    #[test]
    fn uploads_over_the_limits_are_refused_whole() {
        let limits = UploadLimits {
            max_files: 2,
            max_file_size: 3,
            max_total_size: 5,
        };
        let part = |n: &str, b: &'static [u8]| (n.to_owned(), axum::body::Bytes::from_static(b));
        let detail = |count, parts: &[(String, axum::body::Bytes)]| {
            over_limits(&limits, count, parts)
                .err()
                .map(|r| r.status().as_u16())
        };
        assert_eq!(detail(2, &[part("a", b"123"), part("b", b"12")]), None);
        assert_eq!(detail(3, &[part("a", b"1")]), Some(413), "too many parts");
        assert_eq!(detail(1, &[part("a", b"1234")]), Some(413), "one too large");
        assert_eq!(
            detail(2, &[part("a", b"123"), part("b", b"123")]),
            Some(413),
            "too large together"
        );
    }

    #[test]
    fn artifact_paths_resolve_like_the_gateway() {
        assert_eq!(
            resolve("mnt/user-data/outputs/./a.md").ok().as_deref(),
            Some("/mnt/user-data/outputs/a.md")
        );
        let status = |p: &str| resolve(p).err().map(|r| r.status().as_u16());
        assert_eq!(status("etc/passwd"), Some(400));
        assert_eq!(status("mnt/user-dataX/a"), Some(400));
        assert_eq!(status("mnt/user-data/outputs/../../../x"), Some(403));
        assert_eq!(status("mnt/user-data/outputs/../uploads/x"), None);
    }
}
