//! The robot's messages and files: `groupMessages/send`, `oToMessages/batchSend`,
//! `messageFiles/download` with the signed download it hands out, and the legacy
//! `media/upload`.
//!
//! Rules enforced (DingTalk's where documented, the fake's guess where marked in
//! [`code`]): `robotCode` is the app's robot; `msgParam` is a JSON object *in a string*
//! with the fields its `msgKey` needs; a markdown text is at most the fake's markdown
//! limit; a group is one the robot is in; `userIds` are 1 to [`MAX_USER_IDS`], unknown
//! ones come back in `invalidStaffIdList`, held-back ones in `flowControlledStaffIdList`;
//! a file or image message names an uploaded `media_id`; uploads are of a known `type`,
//! not empty, and at most [`MAX_UPLOAD_BYTES`] (2 MB for voice).

use crate::image::ImageFormat;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::time::Instant;

use super::rest::{error, json as answer, legacy_error};
use super::{DingTalk, MAX_UPLOAD_BYTES, MAX_USER_IDS, ROBOT_CODE, Sent, Upload, code};
use crate::skeleton::http::{Answer, Body};

/// The largest voice upload (documented).
const MAX_VOICE_BYTES: usize = 2 * 1024 * 1024;

type Refusal = (u16, Value);

/// The `msgKey` and parsed `msgParam` of a send, checked.
fn message(inner: &DingTalk, body: &Value) -> Result<(String, Value), Refusal> {
    if body.get("robotCode").and_then(Value::as_str) != Some(ROBOT_CODE) {
        return Err(error(400, code::INVALID_ROBOT_CODE));
    }
    let key = body
        .get("msgKey")
        .and_then(Value::as_str)
        .ok_or_else(|| error(400, code::INVALID_MSG_KEY))?;
    let bad_param = || error(400, code::INVALID_MSG_PARAM);
    let param: Value = body
        .get("msgParam")
        .and_then(Value::as_str)
        .and_then(|s| serde_json::from_str(s).ok())
        .filter(Value::is_object)
        .ok_or_else(bad_param)?;
    let field = |name: &str| {
        param
            .get(name)
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(bad_param)
    };
    let uploaded = |id: &str| inner.uploads.iter().any(|u| u.media_id == id);
    match key {
        "sampleText" => {
            field("content")?;
        }
        "sampleMarkdown" => {
            field("title")?;
            if field("text")?.len() > inner.max_markdown_bytes {
                return Err(error(400, code::CONTENT_TOO_LONG));
            }
        }
        "sampleImageMsg" => {
            let photo = field("photoURL")?;
            let url = photo.starts_with("http://") || photo.starts_with("https://");
            if !url && !uploaded(photo) {
                return Err(error(400, code::MEDIA_NOT_FOUND));
            }
        }
        "sampleFile" => {
            if !uploaded(field("mediaId")?) {
                return Err(error(400, code::MEDIA_NOT_FOUND));
            }
            field("fileName")?;
            field("fileType")?;
        }
        _ => return Err(error(400, code::INVALID_MSG_KEY)),
    }
    Ok((key.to_owned(), param))
}

fn process_query_key(inner: &mut DingTalk) -> String {
    format!("fake-process-query-key-{}", inner.next_id())
}

/// `POST /v1.0/robot/groupMessages/send {robotCode, openConversationId, msgKey,
/// msgParam}` → `{processQueryKey}`.
pub(super) fn group_send(inner: &mut DingTalk, body: &Value) -> (u16, Value) {
    let (msg_key, msg_param) = match message(inner, body) {
        Ok(m) => m,
        Err(refusal) => return refusal,
    };
    let Some(cid) = body
        .get("openConversationId")
        .and_then(Value::as_str)
        .filter(|c| inner.groups.contains(*c))
    else {
        return error(400, code::CONVERSATION_NOT_FOUND);
    };
    let key = process_query_key(inner);
    inner.sent.push(Sent {
        route: "group_send",
        conversation_id: Some(cid.to_owned()),
        user_ids: Vec::new(),
        msg_key,
        msg_param,
        process_query_key: key.clone(),
        at: Instant::now(),
    });
    (200, json!({ "processQueryKey": key }))
}

/// `POST /v1.0/robot/oToMessages/batchSend {robotCode, userIds, msgKey, msgParam}` →
/// `{processQueryKey, invalidStaffIdList, flowControlledStaffIdList}`.
pub(super) fn private_send(inner: &mut DingTalk, body: &Value) -> (u16, Value) {
    let (msg_key, msg_param) = match message(inner, body) {
        Ok(m) => m,
        Err(refusal) => return refusal,
    };
    let ids: Option<Vec<String>> = body.get("userIds").and_then(Value::as_array).map(|ids| {
        ids.iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    });
    let Some(ids) = ids.filter(|ids| (1..=MAX_USER_IDS).contains(&ids.len())) else {
        return error(400, code::INVALID_PARAMETER);
    };
    let (known, invalid): (Vec<String>, Vec<String>) =
        ids.into_iter().partition(|id| inner.users.contains(id));
    let (held, reached): (Vec<String>, Vec<String>) = known
        .into_iter()
        .partition(|id| inner.flow_controlled.contains(id));
    let key = process_query_key(inner);
    if !reached.is_empty() {
        inner.sent.push(Sent {
            route: "private_send",
            conversation_id: None,
            user_ids: reached,
            msg_key,
            msg_param,
            process_query_key: key.clone(),
            at: Instant::now(),
        });
    }
    (
        200,
        json!({
            "processQueryKey": key,
            "invalidStaffIdList": invalid,
            "flowControlledStaffIdList": held,
        }),
    )
}

/// `POST /v1.0/robot/messageFiles/download {downloadCode, robotCode}` → `{downloadUrl}`:
/// a signed URL on this server.
pub(super) fn download_code(inner: &mut DingTalk, addr: SocketAddr, body: &Value) -> (u16, Value) {
    if body.get("robotCode").and_then(Value::as_str) != Some(ROBOT_CODE) {
        return error(400, code::INVALID_ROBOT_CODE);
    }
    let Some(download_code) = body
        .get("downloadCode")
        .and_then(Value::as_str)
        .filter(|c| inner.files.contains_key(*c))
        .map(str::to_owned)
    else {
        return error(400, code::DOWNLOAD_CODE_INVALID);
    };
    if let Some(url) = inner
        .files
        .get(&download_code)
        .and_then(|f| f.elsewhere.clone())
    {
        return (200, json!({ "downloadUrl": url }));
    }
    let id = inner.next_id();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let signature = format!("sig{id}x{nanos:08x}");
    if let Some(file) = inner.files.get_mut(&download_code) {
        file.signatures.push(signature.clone());
    }
    inner.file_urls.insert(id, download_code);
    (
        200,
        json!({ "downloadUrl": format!("http://{addr}/fake-files/{id}?sig={signature}") }),
    )
}

/// `GET /fake-files/{id}?sig=…`: the bytes, when the signature is one handed out for
/// that file; 403 otherwise.
pub(super) fn download(inner: &DingTalk, id: Option<&str>, signature: Option<&String>) -> Answer {
    let file = id
        .and_then(|id| id.parse::<u64>().ok())
        .and_then(|id| inner.file_urls.get(&id))
        .and_then(|code| inner.files.get(code));
    match (file, signature) {
        (Some(file), Some(sig)) if file.signatures.contains(sig) => {
            Answer::bytes(file.bytes.clone(), None, None)
        }
        _ => answer(error(403, "AccessDenied")),
    }
}

/// `POST /media/upload?access_token=…&type=…` (multipart `media`; `type` may also be a
/// form field) → `{errcode: 0, errmsg, media_id, type, created_at}`.
pub(super) fn upload(
    inner: &mut DingTalk,
    query: &HashMap<String, String>,
    body: &Body,
) -> (u16, Value) {
    let kind = query
        .get("type")
        .cloned()
        .or_else(|| {
            body.json
                .get("type")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default();
    let limit = match kind.as_str() {
        "image" | "video" | "file" => MAX_UPLOAD_BYTES,
        "voice" => MAX_VOICE_BYTES,
        _ => return legacy_error(code::LEGACY_INVALID_TYPE),
    };
    let Some(media) = body.file("media") else {
        return legacy_error(code::LEGACY_MISSING_MEDIA);
    };
    let (file_name, bytes) = (&media.file_name, &media.bytes);
    if bytes.is_empty() || bytes.len() > limit {
        return legacy_error(code::LEGACY_INVALID_SIZE);
    }
    // An image must be a picture of "jpg、gif、png、bmp" (observed: 40004 "不合法的媒体文件类型").
    let picture = matches!(
        crate::image::sniff(bytes),
        Some(ImageFormat::Jpeg | ImageFormat::Png | ImageFormat::Gif | ImageFormat::Bmp)
    );
    if kind == "image" && !picture {
        return legacy_error(code::LEGACY_INVALID_TYPE);
    }
    let media_id = format!("@lAfakeMedia{}", inner.next_id());
    inner.uploads.push(Upload {
        media_id: media_id.clone(),
        kind: kind.clone(),
        file_name: file_name.clone(),
        bytes: bytes.clone(),
    });
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    (
        200,
        json!({"errcode": 0, "errmsg": "ok", "media_id": media_id, "type": kind, "created_at": created}),
    )
}
