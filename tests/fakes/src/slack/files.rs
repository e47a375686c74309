//! Files: the bot's uploads (`files.getUploadURLExternal`, the POST of the bytes to the
//! upload URL, `files.completeUploadExternal`) and the file host that serves what users
//! shared at `url_private` / `url_private_download`.
//!
//! Rules (docs.slack.dev, files.getUploadURLExternal and files.completeUploadExternal):
//!
//! - `filename` and `length` are required (`invalid_arguments`); a `length` of 0 is
//!   `missing_argument` (documented).
//! - The upload URL takes the bytes raw or as one multipart file part, and answers
//!   `200 OK - <n>`; the fake refuses (HTTP 400) a body whose size is not the announced
//!   `length` (Slack's answer to that is not documented).
//! - `files.completeUploadExternal` takes `files` (a JSON array, or a JSON string in a
//!   form) of `{id, title}`; every id must have been handed out and uploaded, and not
//!   completed before (`file_not_found`, the fake's choice); `channel_id` (or `channels`)
//!   must be known; `thread_ts` needs a channel and a root message there, as for
//!   `chat.postMessage`. Shared to a channel, the file is a bot message there.
//! - `files.info {file}` answers a file users shared whole (its URLs too): how a file shared
//!   over Slack Connect, whose event carries its id alone, is read (`file_not_found`
//!   otherwise).
//! - With [`FakeSlack::move_files_to`](super::FakeSlack::move_files_to) the file host
//!   plays Enterprise Grid's: a 302 to the same path on another host, which wants the
//!   token again.
//! - The file host serves a file only with `Authorization: Bearer <bot token>`; without it
//!   Slack answers its sign-in page (HTTP 200, `text/html`), and so does the fake, so a
//!   client that does not check what it got stores a web page.

use axum::extract::Request;
use axum::http::header;
use serde_json::{Value, json};

use super::chat::check_thread;
use super::events::next_ts;
use super::rest::{MAX_BODY, Params, error, ok, scripted};
use super::{
    BOT_TOKEN, BOT_USER_ID, MAX_TEXT_CHARS, Message, Shared, Slack, TEAM_ID, Upload, code,
};
use crate::skeleton::http::{Answer, Encoding, Head, Payload, read_body};

/// An upload announced by `files.getUploadURLExternal`, waiting for its bytes and its
/// completion.
pub(super) struct Pending {
    filename: String,
    length: usize,
    bytes: Option<Vec<u8>>,
}

/// `files.info {file}` → `{file}`: a file users shared (`file_not_found` for any other id,
/// `invalid_arguments` without one).
pub(super) fn info(s: &mut Slack, addr: std::net::SocketAddr, p: &Params) -> Answer {
    let Some(id) = p.text("file").filter(|id| !id.is_empty()) else {
        return error(code::INVALID_ARGUMENTS);
    };
    match s.hosted.get(id) {
        Some(f) => {
            let file = super::File::new(id, &f.name, &f.mimetype, f.bytes.len(), addr);
            ok(json!({"file": file.info("")}))
        }
        None => error(code::FILE_NOT_FOUND),
    }
}

/// `files.getUploadURLExternal {filename, length}` → `{upload_url, file_id}`.
pub(super) fn upload_url(s: &mut Slack, addr: std::net::SocketAddr, p: &Params) -> Answer {
    let (Some(filename), Some(length)) = (p.text("filename"), p.int("length")) else {
        return error(code::INVALID_ARGUMENTS);
    };
    let Ok(length) = usize::try_from(length) else {
        return error(code::INVALID_ARGUMENTS);
    };
    if length == 0 {
        return error(code::MISSING_ARGUMENT);
    }
    let file_id = format!("F0UPLOAD{:04}", s.next_id());
    let pending = Pending {
        filename: filename.to_owned(),
        length,
        bytes: None,
    };
    s.pending.insert(file_id.clone(), pending);
    ok(json!({"upload_url": format!("http://{addr}/upload/v1/{file_id}"), "file_id": file_id}))
}

fn text(status: u16, text: String) -> Answer {
    Answer {
        status,
        body: Payload::Bytes {
            bytes: text.into_bytes(),
            name: None,
            content_type: Some("text/plain; charset=utf-8".to_owned()),
        },
        headers: Vec::new(),
    }
}

/// `POST /upload/v1/{file_id}`: the bytes, raw or as a multipart file part.
pub(super) async fn upload(
    shared: &Shared,
    head: &Head,
    file_id: &str,
    request: Request,
) -> Answer {
    let bytes = if head.is_multipart() {
        read_body(head, request, MAX_BODY, Encoding::Json)
            .await
            .ok()
            .and_then(|mut body| body.files.drain(..).next())
            .map(|(_, part)| part.bytes)
    } else {
        axum::body::to_bytes(request.into_body(), MAX_BODY)
            .await
            .ok()
            .map(|b| b.to_vec())
    };
    let s = &mut *shared.lock();
    if let Some(answer) = scripted(s, "upload") {
        return answer;
    }
    let (Some(pending), Some(bytes)) = (s.pending.get_mut(file_id), bytes) else {
        return text(404, "not found".to_owned());
    };
    if bytes.len() != pending.length {
        let said = format!("length {} announced, {} sent", pending.length, bytes.len());
        return text(400, said);
    }
    let n = bytes.len();
    pending.bytes = Some(bytes);
    text(200, format!("OK - {n}"))
}

/// `files.completeUploadExternal {files, channel_id | channels, thread_ts,
/// initial_comment}`.
pub(super) fn complete(s: &mut Slack, p: &Params) -> Answer {
    let files: Vec<(String, Option<String>)> = p
        .json("files")
        .and_then(|f| f.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|f| {
            let id = f.get("id")?.as_str()?.to_owned();
            Some((
                id,
                f.get("title").and_then(Value::as_str).map(str::to_owned),
            ))
        })
        .collect();
    if files.is_empty() {
        return error(code::INVALID_ARGUMENTS);
    }
    let channel = p
        .text("channel_id")
        .or_else(|| p.text("channels").and_then(|c| c.split(',').next()))
        .map(str::to_owned);
    if channel
        .as_ref()
        .is_some_and(|c| !s.channels.contains_key(c))
    {
        return error(code::CHANNEL_NOT_FOUND);
    }
    let thread_ts = match (&channel, p.text("thread_ts")) {
        (None, Some(_)) => return error(code::INVALID_ARGUMENTS),
        (Some(channel), _) => match check_thread(s, channel, p) {
            Ok(thread_ts) => thread_ts,
            Err(answer) => return answer,
        },
        (None, None) => None,
    };
    let comment = p.str("initial_comment").map(str::to_owned);
    if comment
        .as_ref()
        .is_some_and(|c| c.chars().count() > MAX_TEXT_CHARS)
    {
        return error(code::MSG_TOO_LONG);
    }
    let ready = |id: &String| s.pending.get(id).is_some_and(|f| f.bytes.is_some());
    if !files.iter().all(|(id, _)| ready(id)) {
        return error(code::FILE_NOT_FOUND);
    }
    let ts = channel.as_ref().map(|channel| {
        let mut message = Message::new(channel, &next_ts(), BOT_USER_ID, true);
        message.thread_ts.clone_from(&thread_ts);
        message.text = comment.clone().unwrap_or_default();
        message.files = files.iter().map(|(id, _)| id.clone()).collect();
        let ts = message.ts.clone();
        s.messages.push(message);
        ts
    });
    let mut answered = Vec::new();
    for (file_id, title) in files {
        let Some(Pending {
            filename, bytes, ..
        }) = s.pending.remove(&file_id)
        else {
            continue;
        };
        let bytes = bytes.unwrap_or_default();
        answered.push(json!({"id": file_id, "name": filename, "size": bytes.len(),
                             "title": title.clone().unwrap_or_else(|| filename.clone())}));
        s.uploads.push(Upload {
            file_id,
            filename,
            title,
            bytes,
            channel: channel.clone(),
            thread_ts: thread_ts.clone(),
            initial_comment: comment.clone(),
            ts: ts.clone(),
        });
    }
    ok(json!({"files": answered}))
}

/// Slack's sign-in page, what a file URL answers without the bot token.
const SIGN_IN_PAGE: &str = "<!DOCTYPE html><html><head><title>Slack</title></head>\
<body><h1>Sign in to Fake Team</h1><form action=\"/signin\"></form></body></html>";

/// `GET /files-pri/{team}-{file_id}/{name}` or `…/download/{name}`.
pub(super) fn serve(s: &mut Slack, head: &Head, key: &str, rest: &[&str]) -> Answer {
    let bearer = head
        .header(header::AUTHORIZATION)
        .and_then(|a| a.strip_prefix("Bearer "));
    if bearer != Some(BOT_TOKEN) {
        let page = SIGN_IN_PAGE.as_bytes().to_vec();
        return Answer::bytes(page, None, Some("text/html; charset=utf-8".to_owned()));
    }
    if let Some(answer) = scripted(s, "file") {
        return answer;
    }
    if let Some(origin) = &s.files_moved_to {
        let asked = head.header(header::HOST).unwrap_or_default();
        if !origin.ends_with(&format!("//{asked}")) {
            let location = format!("{origin}/files-pri/{key}/{}", rest.join("/"));
            return Answer {
                status: 302,
                body: Payload::Empty,
                headers: vec![("location", location)],
            };
        }
    }
    let file = key
        .strip_prefix(&format!("{TEAM_ID}-"))
        .and_then(|id| s.hosted.get(id));
    let (download, name) = match rest {
        [name] => (false, *name),
        ["download", name] => (true, *name),
        _ => return text(404, "file not found".to_owned()),
    };
    match file {
        Some(f) if f.name == name => {
            let attachment = download.then(|| f.name.clone());
            Answer::bytes(f.bytes.clone(), attachment, Some(f.mimetype.clone()))
        }
        _ => text(404, "file not found".to_owned()),
    }
}
