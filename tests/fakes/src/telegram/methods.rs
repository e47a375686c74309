//! The Bot API methods the fake answers, each a function from parsed parameters to an
//! API answer. `getUpdates` is in `server` (it waits) and `getFile` in `files`; everything
//! here is immediate.

use serde_json::{Value, json};

use super::{Answer, BotMessage, Inner, MAX_TEXT_UTF16};

/// Reads an integer parameter given as a number or a numeric string (form fields).
pub(super) fn int(params: &Value, key: &str) -> Option<i64> {
    match params.get(key)? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Reads an object parameter given as JSON or as a JSON string (form fields).
fn object(params: &Value, key: &str) -> Option<Value> {
    match params.get(key)? {
        v @ Value::Object(_) => Some(v.clone()),
        Value::String(s) => serde_json::from_str(s).ok(),
        _ => None,
    }
}

fn bad_request(description: &str) -> Answer {
    Answer::error(400, description)
}

fn check_text(text: Option<&str>) -> Result<String, Answer> {
    let text = text.unwrap_or("");
    if text.trim().is_empty() {
        return Err(bad_request("Bad Request: message text is empty"));
    }
    if text.encode_utf16().count() > MAX_TEXT_UTF16 {
        return Err(bad_request("Bad Request: message is too long"));
    }
    Ok(text.to_owned())
}

fn chat_json(chat_id: i64) -> Value {
    if chat_id > 0 {
        json!({"id": chat_id, "type": "private", "first_name": "Tester"})
    } else {
        json!({"id": chat_id, "type": "supergroup", "title": "Test group"})
    }
}

/// The message id a new message replies to, from `reply_parameters` or the older
/// `reply_to_message_id`.
fn reply_target(params: &Value) -> Option<i64> {
    object(params, "reply_parameters")
        .and_then(|r| int(&r, "message_id"))
        .or_else(|| int(params, "reply_to_message_id"))
}

fn message_json(inner: &Inner, m: &BotMessage, bot: &Value) -> Value {
    let mut v = json!({
        "message_id": m.message_id,
        "date": inner.now_unix(),
        "chat": chat_json(m.chat_id),
        "from": bot,
    });
    let file = json!({"file_id": m.file_id, "file_unique_id": format!("u-{}", m.file_id)});
    match m.kind {
        "text" => v["text"] = json!(m.text),
        // A photo is every size Telegram made of it; the fake makes one.
        "photo" => {
            let mut size = file;
            size["width"] = json!(1);
            size["height"] = json!(1);
            v["photo"] = json!([size]);
        }
        kind => v[kind] = file,
    }
    if let Some(reply) = m.reply_to {
        v["reply_to_message"] =
            json!({"message_id": reply, "date": inner.now_unix(), "chat": chat_json(m.chat_id)});
    }
    v
}

pub(super) fn send_message(inner: &mut Inner, params: &Value, bot: &Value) -> Answer {
    let Some(chat_id) = int(params, "chat_id") else {
        return bad_request("Bad Request: chat_id is empty");
    };
    let text = match check_text(params.get("text").and_then(Value::as_str)) {
        Ok(text) => text,
        Err(answer) => return answer,
    };
    // Telegram refuses a topic the chat does not have.
    if let Some(topic) = int(params, "message_thread_id")
        && !inner.forum_topics.contains(&(chat_id, topic))
    {
        return bad_request("Bad Request: message thread not found");
    }
    let message = BotMessage {
        chat_id,
        message_id: inner.next_message_id(),
        text,
        reply_to: reply_target(params),
        kind: "text",
        file_id: String::new(),
        edits: 0,
    };
    let json = message_json(inner, &message, bot);
    inner.messages.push(message);
    Answer::ok(json)
}

/// `sendChatAction`: only `typing` is expected from the bridge; a topic must exist.
pub(super) fn send_chat_action(inner: &Inner, params: &Value) -> Answer {
    let Some(chat_id) = int(params, "chat_id") else {
        return bad_request("Bad Request: chat_id is empty");
    };
    if params.get("action").and_then(Value::as_str) != Some("typing") {
        return bad_request("Bad Request: wrong parameter action in request");
    }
    if let Some(topic) = int(params, "message_thread_id")
        && !inner.forum_topics.contains(&(chat_id, topic))
    {
        return bad_request("Bad Request: message thread not found");
    }
    Answer::ok(serde_json::json!(true))
}

pub(super) fn edit_message_text(inner: &mut Inner, params: &Value, bot: &Value) -> Answer {
    let (Some(chat_id), Some(message_id)) = (int(params, "chat_id"), int(params, "message_id"))
    else {
        return bad_request("Bad Request: message identifier is not specified");
    };
    let text = match check_text(params.get("text").and_then(Value::as_str)) {
        Ok(text) => text,
        Err(answer) => return answer,
    };
    let Some(index) = inner
        .messages
        .iter()
        .position(|m| m.chat_id == chat_id && m.message_id == message_id)
    else {
        return bad_request("Bad Request: message to edit not found");
    };
    if inner.messages[index].kind != "text" {
        return bad_request("Bad Request: there is no text in the message to edit");
    }
    if inner.messages[index].text == text {
        return bad_request(
            "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
        );
    }
    inner.messages[index].text = text;
    inner.messages[index].edits += 1;
    let message = inner.messages[index].clone();
    Answer::ok(message_json(inner, &message, bot))
}

pub(super) fn send_file(
    inner: &mut Inner,
    params: &Value,
    bot: &Value,
    field: &'static str,
    bytes: Option<Vec<u8>>,
) -> Answer {
    let Some(chat_id) = int(params, "chat_id") else {
        return bad_request("Bad Request: chat_id is empty");
    };
    let limit: u64 = if field == "photo" { 10 << 20 } else { 50 << 20 };
    let file_id = match (bytes, params.get(field)) {
        (Some(bytes), _) => {
            if bytes.len() as u64 > limit {
                return Answer::error(413, "Request Entity Too Large");
            }
            inner.files.store(bytes)
        }
        (None, Some(Value::String(id))) if inner.files.contains(id) => id.clone(),
        _ => return bad_request(&format!("Bad Request: there is no {field} in the request")),
    };
    let message = BotMessage {
        chat_id,
        message_id: inner.next_message_id(),
        text: params
            .get("caption")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        reply_to: reply_target(params),
        kind: field,
        file_id,
        edits: 0,
    };
    let json = message_json(inner, &message, bot);
    inner.messages.push(message);
    Answer::ok(json)
}

pub(super) fn set_my_commands(inner: &mut Inner, params: &Value) -> Answer {
    let Some(Value::Array(commands)) = object_or_array(params, "commands") else {
        return bad_request("Bad Request: parameter \"commands\" is required");
    };
    let mut menu = Vec::new();
    for c in &commands {
        let command = c.get("command").and_then(Value::as_str).unwrap_or("");
        let description = c.get("description").and_then(Value::as_str).unwrap_or("");
        let command_ok = (1..=32).contains(&command.len())
            && command
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !command_ok || !(1..=256).contains(&description.chars().count()) {
            return bad_request("Bad Request: BOT_COMMAND_INVALID");
        }
        menu.push((command.to_owned(), description.to_owned()));
    }
    let language = params
        .get("language_code")
        .and_then(Value::as_str)
        .filter(|l| !l.is_empty())
        .map(str::to_owned);
    inner.menus.insert(language, menu);
    Answer::ok(json!(true))
}

fn object_or_array(params: &Value, key: &str) -> Option<Value> {
    match params.get(key)? {
        v @ (Value::Object(_) | Value::Array(_)) => Some(v.clone()),
        Value::String(s) => serde_json::from_str(s).ok(),
        _ => None,
    }
}

pub(super) fn set_webhook(inner: &mut Inner, params: &Value) -> Answer {
    let url = params.get("url").and_then(Value::as_str).unwrap_or("");
    if url.is_empty() {
        inner.webhook = None;
    } else {
        let secret = params
            .get("secret_token")
            .and_then(Value::as_str)
            .map(str::to_owned);
        inner.webhook = Some((url.to_owned(), secret));
    }
    Answer::ok(json!(true))
}
