//! The bot endpoints under `/ilink/bot/`: every one a POST of JSON with the token headers,
//! answered HTTP 200 with iLink's JSON (SDK `api.ts`, README "Backend API Protocol").
//!
//! Order, per call: the body must be a JSON object (else HTTP 400, fake); then the headers
//! and the token (else `{"errcode": -14, "errmsg": "session timeout"}`, observed: iLink
//! answers a wrong or missing token, and missing app headers, as an expired session); then
//! a scripted failure; then the endpoint's rules.

use serde_json::{Value, json};
use tokio::time::Instant;

use super::cdn::{self, hex_key};
use super::records::{Sent, SentItem, Typing, Upload};
use super::{
    MAX_TEXT_BYTES, REPLIES_PER_CONTEXT, Shared, Wechat, code, cursor_of, cursor_seq, hold,
};
use crate::skeleton::http::{Answer, Head};

/// `{"errcode": -14, "errmsg": "session timeout"}`: no `ret` (observed).
pub(super) fn session_timeout() -> Answer {
    Answer::json(
        200,
        json!({"errcode": code::SESSION_EXPIRED, "errmsg": "session timeout"}),
    )
}

/// `{"ret": ret, "errmsg": errmsg}`.
pub(super) fn refused(ret: i64, errmsg: &str) -> Answer {
    Answer::json(200, json!({"ret": ret, "errmsg": errmsg}))
}

/// Whether `X-WECHAT-UIN` is what clients send: base64 of a uint32's decimal digits.
fn valid_uin(uin: &str) -> bool {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(uin)
        .ok()
        .and_then(|d| String::from_utf8(d).ok())
        .is_some_and(|digits| digits.parse::<u32>().is_ok())
}

/// Whether the request carries the headers iLink requires and a live token.
pub(super) fn authorized(state: &mut Wechat, head: &Head) -> bool {
    let header_ok = head.header("authorizationtype") == Some("ilink_bot_token")
        && head.header("x-wechat-uin").is_some_and(valid_uin)
        && (!state.require_app_headers
            || (head.header("ilink-app-id").is_some_and(|v| !v.is_empty())
                && head
                    .header("ilink-app-clientversion")
                    .is_some_and(|v| v.parse::<u32>().is_ok())));
    let token = head
        .header("authorization")
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    header_ok && token.is_some_and(|t| state.tokens.check(t, Instant::now()))
}

fn str_field<'a>(body: &'a Value, key: &str) -> &'a str {
    body.get(key).and_then(Value::as_str).unwrap_or("")
}

/// `getupdates`: the long poll. `Err` for an answer without holding.
pub(super) async fn get_updates(shared: &Shared, head: &Head, body: &Value) -> Answer {
    let cursor = str_field(body, "get_updates_buf").to_owned();
    let (from, until, hold_ms) = {
        let state = shared.lock();
        // A cursor the fake never issued: iLink's answer is unknown (no reference sends
        // one), so the fake refuses it on every poll, its strictest reading (fake).
        let Some(from) = cursor_seq(&cursor).filter(|&s| s <= state.seq) else {
            return refused(code::INVALID_PARAM, "invalid get_updates_buf");
        };
        (
            from,
            Instant::now() + state.hold,
            state.hold.as_millis() as u64,
        )
    };
    shared.update(|s| s.waiting_polls += 1);
    let batch = hold(shared, until, |s| {
        if !authorized(s, head) {
            return Some(Err(()));
        }
        let msgs: Vec<(u64, Value)> = s
            .log
            .iter()
            .filter(|p| p.seq > from)
            .map(|p| (p.seq, p.body.clone()))
            .collect();
        (!msgs.is_empty()).then_some(Ok(msgs))
    })
    .await;
    shared.update(|s| s.waiting_polls -= 1);
    let msgs = match batch {
        Some(Err(())) => return session_timeout(),
        Some(Ok(msgs)) => msgs,
        None => Vec::new(),
    };
    let last = msgs.last().map_or(from, |(seq, _)| *seq);
    let msgs: Vec<Value> = msgs.into_iter().map(|(_, m)| m).collect();
    Answer::json(
        200,
        json!({"ret": 0, "msgs": msgs, "get_updates_buf": cursor_of(last),
               "longpolling_timeout_ms": hold_ms}),
    )
}

/// Why a `sendmessage` is refused: `ret -2` with an `errmsg` (observed: iLink answers
/// `-2` for a missing or used-up context, an over-long text, throttling; the `errmsg`s
/// `prepare failed` and `rate limited` are both observed, which goes with which is the
/// fake's).
fn rejected(errmsg: &str) -> Answer {
    refused(code::REJECTED, errmsg)
}

/// The plain bytes a media item points at: its `encrypt_query_param` must be a download
/// parameter of an upload to `to` (or hosted) that its `aes_key` opens.
fn media_bytes(state: &Wechat, item: &Value, to: &str) -> Result<Vec<u8>, &'static str> {
    let media = &item["media"];
    let param = str_field(media, "encrypt_query_param");
    let key = cdn::parse_aes_key(str_field(media, "aes_key")).ok_or("invalid aes_key")?;
    let uploaded_to_other = state
        .uploads
        .iter()
        .any(|u| u.download_param.as_deref() == Some(param) && u.to_user_id != to);
    if uploaded_to_other {
        return Err("media uploaded for another user");
    }
    state
        .open(param, &key)
        .ok_or("invalid encrypt_query_param or aes_key")
}

/// The one item of a message, checked.
fn sent_item(state: &Wechat, item: &Value, to: &str) -> Result<SentItem, &'static str> {
    match item["type"].as_i64() {
        Some(1) => {
            let text = str_field(&item["text_item"], "text");
            if text.is_empty() {
                return Err("empty text");
            }
            if text.len() > MAX_TEXT_BYTES {
                return Err("text too long");
            }
            Ok(SentItem::Text(text.to_owned()))
        }
        Some(2) => media_bytes(state, &item["image_item"], to).map(SentItem::Image),
        Some(3) => media_bytes(state, &item["voice_item"], to).map(SentItem::Voice),
        Some(4) => {
            let file = &item["file_item"];
            let name = str_field(file, "file_name");
            if name.is_empty() {
                return Err("missing file_name");
            }
            let bytes = media_bytes(state, file, to)?;
            Ok(SentItem::File {
                name: name.to_owned(),
                bytes,
            })
        }
        Some(5) => media_bytes(state, &item["video_item"], to).map(SentItem::Video),
        _ => Err("invalid item type"),
    }
}

/// `sendmessage`.
pub(super) fn send_message(state: &mut Wechat, body: &Value) -> Answer {
    let msg = &body["msg"];
    let to = str_field(msg, "to_user_id");
    let client_id = str_field(msg, "client_id");
    let token = str_field(msg, "context_token");
    if to.is_empty() || client_id.is_empty() {
        return rejected("invalid msg: to_user_id and client_id are required");
    }
    if msg["message_type"].as_i64() != Some(2) || msg["message_state"].as_i64() != Some(2) {
        return rejected("invalid msg: message_type 2 and message_state 2 are required");
    }
    let items = msg["item_list"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let [item] = items else {
        return rejected("invalid msg: item_list must hold one item");
    };
    let now = state.now();
    let Some(context) = state.contexts.get(token).filter(|c| c.user == to) else {
        return rejected("prepare failed");
    };
    if context.replies >= REPLIES_PER_CONTEXT {
        return rejected("rate limited");
    }
    let item = match sent_item(state, item, to) {
        Ok(item) => item,
        Err(why) => return rejected(why),
    };
    let delivered = state
        .last_inbound
        .get(to)
        .is_some_and(|&at| now.duration_since(at) < state.reply_window);
    if let Some(context) = state.contexts.get_mut(token) {
        context.replies += 1;
    }
    state.sent.push(Sent {
        to_user_id: to.to_owned(),
        context_token: token.to_owned(),
        client_id: client_id.to_owned(),
        item,
        delivered,
        at: Instant::now(),
        body: body.clone(),
    });
    // SendMessageResp is empty (SDK types.ts).
    Answer::json(200, json!({}))
}

/// `getconfig`: the typing ticket of a user who wrote to the bot.
pub(super) fn get_config(state: &mut Wechat, body: &Value) -> Answer {
    let user = str_field(body, "ilink_user_id");
    if !state.last_inbound.contains_key(user) {
        return refused(code::INVALID_PARAM, "invalid ilink_user_id");
    }
    let n = state.next();
    let ticket = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(format!("fake-typing-ticket-{n}"))
    };
    state.tickets.insert(user.to_owned(), ticket.clone());
    Answer::json(200, json!({"ret": 0, "typing_ticket": ticket}))
}

/// `sendtyping`: with the user's newest ticket, status 1 or 2.
pub(super) fn send_typing(state: &mut Wechat, body: &Value) -> Answer {
    let user = str_field(body, "ilink_user_id");
    let ticket = str_field(body, "typing_ticket");
    if state.tickets.get(user).map(String::as_str) != Some(ticket) || ticket.is_empty() {
        return refused(code::INVALID_PARAM, "invalid typing_ticket");
    }
    let status = body["status"].as_i64().unwrap_or(1);
    if !matches!(status, 1 | 2) {
        return refused(code::INVALID_PARAM, "invalid status");
    }
    state.typing.push(Typing {
        user: user.to_owned(),
        status,
    });
    Answer::json(200, json!({"ret": 0}))
}

/// `getuploadurl`.
pub(super) fn get_upload_url(state: &mut Wechat, body: &Value) -> Answer {
    let bad = |why: &str| refused(code::INVALID_PARAM, why);
    let filekey = str_field(body, "filekey");
    let to = str_field(body, "to_user_id");
    let media_type = body["media_type"].as_i64().unwrap_or(0);
    let (Some(rawsize), Some(filesize)) = (body["rawsize"].as_u64(), body["filesize"].as_u64())
    else {
        return bad("rawsize and filesize are required");
    };
    let md5 = str_field(body, "rawfilemd5");
    if filekey.is_empty() {
        return bad("filekey is required");
    }
    if !(1..=4).contains(&media_type) {
        return bad("invalid media_type");
    }
    if !state.last_inbound.contains_key(to) {
        // Observed: a dummy to_user_id is ret -1.
        return bad("invalid to_user_id");
    }
    if md5.len() != 32 || !md5.bytes().all(|b| b.is_ascii_hexdigit()) {
        return bad("invalid rawfilemd5");
    }
    if filesize != cdn::padded_size(rawsize) {
        return bad("filesize is not the AES-128-ECB size of rawsize");
    }
    let Some(aeskey) = hex_key(str_field(body, "aeskey")) else {
        return bad("invalid aeskey");
    };
    let needs_thumb = matches!(media_type, 1 | 2) && body["no_need_thumb"] != json!(true);
    let thumb = if needs_thumb {
        let (Some(size), Some(cipher)) = (
            body["thumb_rawsize"].as_u64(),
            body["thumb_filesize"].as_u64(),
        ) else {
            return bad("thumb fields are required for images and videos");
        };
        let md5 = str_field(body, "thumb_rawfilemd5");
        if cipher != cdn::padded_size(size) || md5.len() != 32 {
            return bad("invalid thumb fields");
        }
        Some((size, md5.to_owned(), cipher))
    } else {
        None
    };
    let register = |state: &mut Wechat, (rawsize, rawfilemd5, filesize): (u64, String, u64)| {
        let n = state.next();
        let upload_param = cdn::param("upload", n);
        state
            .upload_params
            .insert(upload_param.clone(), state.uploads.len());
        state.uploads.push(Upload {
            filekey: filekey.to_owned(),
            media_type,
            to_user_id: to.to_owned(),
            rawsize,
            rawfilemd5,
            filesize,
            aeskey,
            upload_param: upload_param.clone(),
            plain: None,
            download_param: None,
            refusals: Vec::new(),
        });
        upload_param
    };
    let upload_param = register(state, (rawsize, md5.to_owned(), filesize));
    let mut answer = json!({"upload_param": upload_param});
    if let Some(thumb) = thumb {
        answer["thumb_upload_param"] = json!(register(state, thumb));
    }
    if state.upload_full_url {
        answer["upload_full_url"] = json!(state.upload_url(&upload_param, filekey));
    }
    Answer::json(200, answer)
}
