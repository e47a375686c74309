//! The message calls of the REST fake: create, reply, patch (shared cards only, 5 per
//! second per message), reactions, with Feishu's content limits.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::super::{
    APP_ID, BotMessage, Feishu, MAX_CARD_BYTES, MAX_TEXT_BYTES, PATCHES_PER_SECOND, Patch,
    TENANT_KEY, code,
};
use super::{data, error};
use crate::skeleton::http::Answer;

/// Checks `msg_type` + `content` as Feishu does before sending: content is a JSON
/// string; text ≤ 150 KB, card and post ≤ 30 KB; a card is a JSON object; an image or
/// file key must be one uploaded.
pub(super) fn check_content(inner: &Feishu, msg_type: &str, content: &str) -> Result<(), Answer> {
    let parsed: Value = match serde_json::from_str(content) {
        Ok(v @ Value::Object(_)) => v,
        _ if msg_type == "interactive" => {
            return Err(error(
                code::CARD_CONTENT_FAILED,
                "Failed to create card content, ext=content is not a JSON object",
            ));
        }
        _ => {
            return Err(error(
                code::INVALID_PARAMETER,
                "Your request contains an invalid request parameter, ext=invalid content",
            ));
        }
    };
    let too_long = || {
        error(
            code::CONTENT_TOO_LONG,
            "The length of the message content reaches its limit.",
        )
    };
    let uploaded =
        |kind: &str, key: &str| inner.uploads.iter().any(|u| u.kind == kind && u.key == key);
    let invalid = |what: &str| {
        error(
            code::INVALID_PARAMETER,
            &format!("Your request contains an invalid request parameter, ext={what}"),
        )
    };
    match msg_type {
        "text" => {
            if !parsed.get("text").is_some_and(Value::is_string) {
                return Err(invalid("text is required"));
            }
            if content.len() > MAX_TEXT_BYTES {
                return Err(too_long());
            }
        }
        "interactive" | "post" => {
            // The limit is on the request body, where the content is a JSON string.
            if Value::from(content).to_string().len() > MAX_CARD_BYTES {
                return Err(too_long());
            }
        }
        "image" => {
            let key = parsed
                .get("image_key")
                .and_then(Value::as_str)
                .unwrap_or("");
            if !uploaded("image", key) {
                return Err(invalid("invalid image_key"));
            }
        }
        "file" => {
            let key = parsed.get("file_key").and_then(Value::as_str).unwrap_or("");
            if !uploaded("file", key) {
                return Err(invalid("invalid file_key"));
            }
        }
        _ => return Err(invalid("invalid msg_type")),
    }
    Ok(())
}

fn str_field<'a>(body: &'a Value, key: &str) -> Result<&'a str, Answer> {
    body.get(key).and_then(Value::as_str).ok_or_else(|| {
        error(
            code::FIELD_VALIDATION,
            &format!("field validation failed: {key} is required"),
        )
    })
}

pub(super) fn send(
    inner: &mut Feishu,
    chat_id: String,
    reply_to: Option<String>,
    body: &Value,
) -> Answer {
    let (msg_type, content) = match (str_field(body, "msg_type"), str_field(body, "content")) {
        (Ok(t), Ok(c)) => (t, c),
        (Err(a), _) | (_, Err(a)) => return a,
    };
    if let Err(refusal) = check_content(inner, msg_type, content) {
        return refusal;
    }
    // `uuid` (at most 50 characters): Feishu sends at most one message per uuid within
    // an hour. What it answers the others it does not document; the fake answers with the
    // message sent under it.
    let uuid = body.get("uuid").and_then(Value::as_str).map(str::to_owned);
    if uuid.as_ref().is_some_and(|u| u.chars().count() > 50) {
        return error(code::FIELD_VALIDATION, "field validation failed: uuid");
    }
    if let Some(uuid) = &uuid {
        let hour = std::time::Duration::from_secs(3600);
        let earlier = inner
            .messages
            .iter()
            .find(|m| m.uuid.as_ref() == Some(uuid) && m.at.elapsed() < hour);
        if let Some(earlier) = earlier {
            return data(message_json(earlier));
        }
    }
    let n = inner.next_id();
    let message_id = format!("om_bot{n:026}");
    let message = BotMessage {
        message_id: message_id.clone(),
        chat_id: chat_id.clone(),
        reply_to: reply_to.clone(),
        msg_type: msg_type.to_owned(),
        content: content.to_owned(),
        patches: Vec::new(),
        at: Instant::now(),
        uuid,
    };
    let answer = message_json(&message);
    inner.messages.push(message);
    data(answer)
}

pub(super) fn message_json(m: &BotMessage) -> Value {
    let mut data = json!({
        "message_id": m.message_id,
        "chat_id": m.chat_id,
        "msg_type": m.msg_type,
        "create_time": "0",
        "update_time": "0",
        "deleted": false,
        "updated": !m.patches.is_empty(),
        "sender": {"id": APP_ID, "id_type": "app_id", "sender_type": "app",
            "tenant_key": TENANT_KEY},
        "body": {"content": m.content},
    });
    if let Some(parent) = &m.reply_to {
        data["parent_id"] = json!(parent);
        data["root_id"] = json!(parent);
    }
    data
}

/// The chat of a message the bot may act on: one a user sent (pushed) or one it sent.
pub(super) fn chat_of(inner: &Feishu, message_id: &str) -> Option<String> {
    inner.user_messages.get(message_id).cloned().or_else(|| {
        inner
            .messages
            .iter()
            .find(|m| m.message_id == message_id)
            .map(|m| m.chat_id.clone())
    })
}

pub(super) fn unknown_message() -> Answer {
    error(
        code::INVALID_PARAMETER,
        "Your request contains an invalid request parameter, ext=invalid message_id",
    )
}

pub(super) fn create(inner: &mut Feishu, query: &HashMap<String, String>, body: &Value) -> Answer {
    match query.get("receive_id_type").map(String::as_str) {
        Some("chat_id" | "open_id" | "user_id" | "union_id" | "email") => {}
        _ => {
            return error(
                code::INVALID_PARAMETER,
                "Your request contains an invalid request parameter, ext=invalid receive_id_type",
            );
        }
    }
    match str_field(body, "receive_id") {
        Ok(receive_id) if !receive_id.is_empty() => {
            let chat = receive_id.to_owned();
            send(inner, chat, None, body)
        }
        Ok(_) => error(
            code::FIELD_VALIDATION,
            "field validation failed: receive_id",
        ),
        Err(a) => a,
    }
}

pub(super) fn reply(inner: &mut Feishu, id: &str, body: &Value) -> Answer {
    match chat_of(inner, id) {
        Some(chat) => send(inner, chat, Some(id.to_owned()), body),
        None => unknown_message(),
    }
}

/// Whether a card declares `config.update_multi: true` (a shared card).
fn shared_card(content: &str) -> bool {
    serde_json::from_str::<Value>(content)
        .ok()
        .and_then(|card| {
            card.pointer("/config/update_multi")
                .and_then(Value::as_bool)
        })
        == Some(true)
}

pub(super) fn patch(inner: &mut Feishu, id: &str, body: &Value) -> Answer {
    let content = match str_field(body, "content") {
        Ok(c) => c.to_owned(),
        Err(a) => return a,
    };
    let Some(index) = inner.messages.iter().position(|m| m.message_id == id) else {
        if inner.user_messages.contains_key(id) {
            return error(code::NOT_SENDER, "Bot is NOT the sender of the message.");
        }
        return unknown_message();
    };
    if inner.messages[index].msg_type != "interactive" {
        return error(
            code::INVALID_PARAMETER,
            "Your request contains an invalid request parameter, ext=only interactive messages can be patched",
        );
    }
    if let Err(refusal) = check_content(inner, "interactive", &content) {
        return refusal;
    }
    if !shared_card(&inner.messages[index].content) || !shared_card(&content) {
        return error(
            code::CARD_CONTENT_FAILED,
            "Failed to create card content, ext=not a shared card: config.update_multi must be true before and after the update",
        );
    }
    let now = Instant::now();
    let window = inner.patch_window.entry(id.to_owned()).or_default();
    while window
        .front()
        .is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(1))
    {
        window.pop_front();
    }
    if window.len() >= PATCHES_PER_SECOND {
        inner.rate_limited += 1;
        return error(
            code::RATE_LIMITED,
            "This operation triggers the frequency limit.",
        );
    }
    window.push_back(now);
    let message = &mut inner.messages[index];
    message.content = content.clone();
    message.patches.push(Patch { content, at: now });
    data(json!({}))
}

pub(super) fn reaction(inner: &mut Feishu, id: &str, body: &Value) -> Answer {
    if chat_of(inner, id).is_none() {
        return unknown_message();
    }
    let emoji = body
        .pointer("/reaction_type/emoji_type")
        .and_then(Value::as_str)
        .unwrap_or("");
    if emoji.is_empty() || !emoji.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return error(code::REACTION_INVALID, "reaction type is invalid.");
    }
    let n = inner.next_id();
    inner.reactions.push((id.to_owned(), emoji.to_owned()));
    data(json!({
        "reaction_id": format!("fake-reaction-{n}"),
        "operator": {"operator_id": APP_ID, "operator_type": "app"},
        "action_time": "0",
        "reaction_type": {"emoji_type": emoji},
    }))
}
