//! The Bot API methods the fake answers, each a function from parsed parameters to an
//! API answer. `getUpdates` is in `server` (it waits) and `getFile` in `files`; everything
//! here is immediate.
//!
//! A text or caption goes through [`formatted`] first: without `parse_mode` it is kept as
//! sent; with `"HTML"` (any case) it becomes its visible text and entities (`html`), and
//! the length limits count that visible text; any other mode, Markdown included, is a 400
//! "unsupported parse_mode" (the fake does not play Markdown).

use serde_json::{Value, json};

use super::entity::Entity;
use super::html;
use super::{
    Answer, BotMessage, MAX_CAPTION_UTF16, MAX_ENTITY_URL_BYTES, MAX_TEXT_UTF16, Telegram,
};

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

/// `params[field]` as Telegram shows it under `params.parse_mode`: the visible text and
/// its entities, or the 400 for a text it cannot parse or a mode it does not know. The
/// second value says whether a parse mode was given.
fn formatted(params: &Value, field: &str) -> Result<(String, Vec<Entity>, bool), Answer> {
    let raw = params.get(field).and_then(Value::as_str).unwrap_or("");
    match params
        .get("parse_mode")
        .and_then(Value::as_str)
        .unwrap_or("")
    {
        "" => Ok((raw.to_owned(), Vec::new(), false)),
        mode if mode.eq_ignore_ascii_case("html") => html::parse(raw)
            .map(|(text, entities)| (text, entities, true))
            .map_err(|e| bad_request(&e.description())),
        _ => Err(bad_request("Bad Request: unsupported parse_mode")),
    }
}

/// The visible text and entities of a message's `text`, 1 to 4096 UTF-16 units.
fn check_text(params: &Value) -> Result<(String, Vec<Entity>), Answer> {
    let (text, entities, _) = formatted(params, "text")?;
    if text.trim().is_empty() {
        return Err(bad_request("Bad Request: message text is empty"));
    }
    if text.encode_utf16().count() > MAX_TEXT_UTF16 {
        return Err(bad_request("Bad Request: message is too long"));
    }
    let addresses: usize = entities
        .iter()
        .filter_map(|e| e.url.as_deref())
        .map(str::len)
        .sum();
    if addresses > MAX_ENTITY_URL_BYTES {
        return Err(bad_request("Bad Request: entities too long"));
    }
    Ok((text, entities))
}

/// The visible caption and its entities. Its 1024-unit limit is checked only under a
/// parse mode, so calls without one behave as before.
fn check_caption(params: &Value) -> Result<(String, Vec<Entity>), Answer> {
    let (caption, entities, parsed) = formatted(params, "caption")?;
    if parsed && caption.encode_utf16().count() > MAX_CAPTION_UTF16 {
        return Err(bad_request("Bad Request: message caption is too long"));
    }
    Ok((caption, entities))
}

/// Entities as the Bot API answers them.
pub(super) fn entities_json(entities: &[Entity]) -> Value {
    Value::Array(entities.iter().map(Entity::to_json).collect())
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

fn message_json(inner: &Telegram, m: &BotMessage, bot: &Value) -> Value {
    let mut v = json!({
        "message_id": m.message_id,
        "date": inner.now_unix(),
        "chat": chat_json(m.chat_id),
        "from": bot,
    });
    let file = json!({"file_id": m.file_id, "file_unique_id": format!("u-{}", m.file_id)});
    match m.kind {
        "text" => {
            v["text"] = json!(m.text);
            if !m.entities.is_empty() {
                v["entities"] = entities_json(&m.entities);
            }
        }
        // A photo is every size Telegram made of it; the fake makes one.
        "photo" => {
            let mut size = file;
            size["width"] = json!(1);
            size["height"] = json!(1);
            v["photo"] = json!([size]);
        }
        kind => v[kind] = file,
    }
    // A file's caption, as Telegram answers it: omitted when empty, like its entities.
    if m.kind != "text" && !m.text.is_empty() {
        v["caption"] = json!(m.text);
        if !m.entities.is_empty() {
            v["caption_entities"] = entities_json(&m.entities);
        }
    }
    if let Some(reply) = m.reply_to {
        v["reply_to_message"] =
            json!({"message_id": reply, "date": inner.now_unix(), "chat": chat_json(m.chat_id)});
    }
    v
}

pub(super) fn send_message(inner: &mut Telegram, params: &Value, bot: &Value) -> Answer {
    let Some(chat_id) = int(params, "chat_id") else {
        return bad_request("Bad Request: chat_id is empty");
    };
    let (text, entities) = match check_text(params) {
        Ok(checked) => checked,
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
        entities,
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
pub(super) fn send_chat_action(inner: &Telegram, params: &Value) -> Answer {
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

pub(super) fn edit_message_text(inner: &mut Telegram, params: &Value, bot: &Value) -> Answer {
    let (Some(chat_id), Some(message_id)) = (int(params, "chat_id"), int(params, "message_id"))
    else {
        return bad_request("Bad Request: message identifier is not specified");
    };
    let (text, entities) = match check_text(params) {
        Ok(checked) => checked,
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
    // A change of entities alone is a change, as in Telegram.
    if inner.messages[index].text == text && inner.messages[index].entities == entities {
        return bad_request(
            "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
        );
    }
    inner.messages[index].text = text;
    inner.messages[index].entities = entities;
    inner.messages[index].edits += 1;
    let message = inner.messages[index].clone();
    Answer::ok(message_json(inner, &message, bot))
}

pub(super) fn send_file(
    inner: &mut Telegram,
    params: &Value,
    bot: &Value,
    field: &'static str,
    bytes: Option<Vec<u8>>,
) -> Answer {
    let Some(chat_id) = int(params, "chat_id") else {
        return bad_request("Bad Request: chat_id is empty");
    };
    let (caption, entities) = match check_caption(params) {
        Ok(checked) => checked,
        Err(answer) => return answer,
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
        text: caption,
        entities,
        reply_to: reply_target(params),
        kind: field,
        file_id,
        edits: 0,
    };
    let json = message_json(inner, &message, bot);
    inner.messages.push(message);
    Answer::ok(json)
}

/// The emoji Telegram accepts as a reaction (`ReactionTypeEmoji`); any other is
/// `REACTION_INVALID`.
const REACTION_EMOJI: &[&str] = &[
    "👍",
    "👎",
    "❤",
    "🔥",
    "🥰",
    "👏",
    "😁",
    "🤔",
    "🤯",
    "😱",
    "🤬",
    "😢",
    "🎉",
    "🤩",
    "🤮",
    "💩",
    "🙏",
    "👌",
    "🕊",
    "🤡",
    "🥱",
    "🥴",
    "😍",
    "🐳",
    "❤‍🔥",
    "🌚",
    "🌭",
    "💯",
    "🤣",
    "⚡",
    "🍌",
    "🏆",
    "💔",
    "🤨",
    "😐",
    "🍓",
    "🍾",
    "💋",
    "🖕",
    "😈",
    "😴",
    "😭",
    "🤓",
    "👻",
    "👨‍💻",
    "👀",
    "🎃",
    "🙈",
    "😇",
    "😨",
    "🤝",
    "✍",
    "🤗",
    "🫡",
    "🎅",
    "🎄",
    "☃",
    "💅",
    "🤪",
    "🗿",
    "🆒",
    "💘",
    "🙉",
    "🦄",
    "😘",
    "💊",
    "🙊",
    "😎",
    "👾",
    "🤷‍♂",
    "🤷",
    "🤷‍♀",
    "😡",
];

/// Whether message `message_id` of chat `chat_id` exists: a user's (an update the fake
/// delivered or holds) or the bot's.
fn message_exists(inner: &Telegram, chat_id: i64, message_id: i64) -> bool {
    let of_user = |update: &Value| {
        let message = &update["message"];
        message["chat"]["id"].as_i64() == Some(chat_id)
            && message["message_id"].as_i64() == Some(message_id)
    };
    inner.pending.iter().chain(&inner.confirmed).any(of_user)
        || inner
            .messages
            .iter()
            .any(|m| m.chat_id == chat_id && m.message_id == message_id)
}

/// `setMessageReaction`: the bot's reaction on a message replaces the one it set before
/// (an empty list removes it). A bot sets at most one, from [`REACTION_EMOJI`].
pub(super) fn set_message_reaction(inner: &mut Telegram, params: &Value) -> Answer {
    let (Some(chat_id), Some(message_id)) = (int(params, "chat_id"), int(params, "message_id"))
    else {
        return bad_request("Bad Request: message identifier is not specified");
    };
    let reaction = match object_or_array(params, "reaction") {
        None => Vec::new(),
        Some(Value::Array(items)) => items,
        Some(_) => return bad_request("Bad Request: can't parse reaction types JSON object"),
    };
    if reaction.len() > 1 {
        return bad_request("Bad Request: REACTIONS_TOO_MANY");
    }
    let mut emoji = Vec::new();
    for item in &reaction {
        match (item["type"].as_str(), item["emoji"].as_str()) {
            (Some("emoji"), Some(e)) if REACTION_EMOJI.contains(&e) => emoji.push(e.to_owned()),
            _ => return bad_request("Bad Request: REACTION_INVALID"),
        }
    }
    if !message_exists(inner, chat_id, message_id) {
        return bad_request("Bad Request: message to react not found");
    }
    inner.reactions.insert((chat_id, message_id), emoji);
    Answer::ok(json!(true))
}

pub(super) fn set_my_commands(inner: &mut Telegram, params: &Value) -> Answer {
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
    // Like Telegram: empty or absent is the default menu, anything else must be a two-letter
    // ISO 639-1 code (`zh-TW` and `zh-hant` are refused).
    let language = match params.get("language_code") {
        None | Some(Value::Null) => None,
        Some(Value::String(l)) if l.is_empty() => None,
        Some(Value::String(l)) if l.len() == 2 && l.bytes().all(|b| b.is_ascii_lowercase()) => {
            Some(l.clone())
        }
        Some(_) => return bad_request("Bad Request: invalid language code specified"),
    };
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

pub(super) fn set_webhook(inner: &mut Telegram, params: &Value) -> Answer {
    let url = params.get("url").and_then(Value::as_str).unwrap_or("");
    if inner.hosted_webhooks
        && !url.is_empty()
        && let Some(refusal) = hosted_webhook_refusal(url)
    {
        return bad_request(refusal);
    }
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

/// Why the hosted Bot API refuses to deliver to `url`, in its words, if it does
/// (telegram-bot-api's `WebhookActor::start_up` outside `--local`).
fn hosted_webhook_refusal(url: &str) -> Option<&'static str> {
    const HTTPS: &str = "Bad Request: bad webhook: An HTTPS URL must be provided for webhook";
    const PORTS: &str =
        "Bad Request: bad webhook: Webhook can be set up only on ports 80, 88, 443 or 8443";
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return Some(HTTPS);
    };
    if parsed.scheme() != "https" {
        return Some(HTTPS);
    }
    match parsed.port_or_known_default() {
        Some(80 | 88 | 443 | 8443) => None,
        _ => Some(PORTS),
    }
}

/// `getWebhookInfo`: the registered URL (empty without one) and the updates waiting.
pub(super) fn webhook_info(inner: &Telegram) -> Answer {
    let url = inner.webhook.as_ref().map_or("", |(url, _)| url.as_str());
    Answer::ok(json!({
        "url": url,
        "has_custom_certificate": false,
        "pending_update_count": inner.pending.len(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telegram::{FakeTelegram, TOKEN};

    const CHAT: i64 = 42;
    const NOT_MODIFIED: &str = "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message";

    /// Calls `method` with `params`: the status and the whole answer.
    async fn call(fake: &FakeTelegram, method: &str, params: Value) -> (u16, Value) {
        let response = reqwest::Client::new()
            .post(format!("{}/bot{TOKEN}/{method}", fake.api_url()))
            .json(&params)
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.json().await.unwrap())
    }

    async fn send_html(fake: &FakeTelegram, text: &str) -> (u16, Value) {
        let params = json!({"chat_id": CHAT, "text": text, "parse_mode": "HTML"});
        call(fake, "sendMessage", params).await
    }

    fn bad(description: &str) -> (u16, Value) {
        (
            400,
            json!({"ok": false, "error_code": 400, "description": description}),
        )
    }

    #[tokio::test]
    async fn hosted_webhooks_are_https_on_telegrams_ports() {
        let fake = FakeTelegram::start().await.unwrap();
        let set = |url: &str| call(&fake, "setWebhook", json!({"url": url}));
        // A local Bot API server delivers anywhere.
        assert_eq!(set("http://127.0.0.1:9/hook").await.0, 200);
        fake.require_hosted_webhooks();
        assert_eq!(
            set("http://bot.example.com/hook").await,
            bad("Bad Request: bad webhook: An HTTPS URL must be provided for webhook")
        );
        assert_eq!(
            set("https://bot.example.com:8080/hook").await,
            bad(
                "Bad Request: bad webhook: Webhook can be set up only on ports 80, 88, 443 or 8443"
            )
        );
        assert_eq!(
            fake.webhook().map(|(url, _)| url).as_deref(),
            Some("http://127.0.0.1:9/hook")
        );
        for url in [
            "https://bot.example.com/hook",
            "https://bot.example.com:8443/hook",
            "",
        ] {
            assert_eq!(set(url).await.0, 200, "{url}");
        }
    }

    #[tokio::test]
    async fn html_is_stored_and_answered_as_visible_text_and_entities() {
        let fake = FakeTelegram::start().await.unwrap();
        let (status, body) = send_html(&fake, "<b>Hi</b> &amp; <i>😀</i>").await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["result"]["text"], "Hi & 😀");
        assert_eq!(
            body["result"]["entities"],
            json!([{"type": "bold", "offset": 0, "length": 2},
                   {"type": "italic", "offset": 5, "length": 2}])
        );
        let messages = fake.bot_messages(CHAT);
        assert_eq!(messages[0].text, "Hi & 😀");
        assert_eq!(
            messages[0].entities,
            [Entity::new("bold", 0, 2), Entity::new("italic", 5, 2)]
        );
        let sent = &fake.calls_to("sendMessage")[0];
        assert_eq!(sent.parse_mode(), Some("HTML"));
        assert_eq!(
            sent.text(),
            Some("<b>Hi</b> &amp; <i>😀</i>"),
            "the call keeps what was sent"
        );
    }

    #[tokio::test]
    async fn a_reaction_takes_one_listed_emoji_on_a_message_the_chat_has() {
        let fake = FakeTelegram::start().await.unwrap();
        let id = fake
            .inject(crate::telegram::Incoming::private(CHAT, "hi"))
            .message_id;
        let react = |message: i64, emoji: &[&str]| {
            let reaction: Vec<Value> = emoji
                .iter()
                .map(|e| json!({"type": "emoji", "emoji": e}))
                .collect();
            json!({"chat_id": CHAT, "message_id": message, "reaction": reaction})
        };
        assert_eq!(
            call(&fake, "setMessageReaction", react(id, &["👀"])).await,
            (200, json!({"ok": true, "result": true}))
        );
        assert_eq!(
            call(&fake, "setMessageReaction", react(id, &["⏳"])).await,
            bad("Bad Request: REACTION_INVALID")
        );
        assert_eq!(
            call(&fake, "setMessageReaction", react(id, &["👀", "🤷"])).await,
            bad("Bad Request: REACTIONS_TOO_MANY")
        );
        assert_eq!(
            call(&fake, "setMessageReaction", react(id + 1, &["👀"])).await,
            bad("Bad Request: message to react not found")
        );
        assert_eq!(fake.reactions(CHAT), [(id, vec!["👀".to_owned()])]);
        // The next replaces it; an empty list removes it.
        call(&fake, "setMessageReaction", react(id, &["🤷"])).await;
        assert_eq!(fake.reactions(CHAT), [(id, vec!["🤷".to_owned()])]);
        call(&fake, "setMessageReaction", react(id, &[])).await;
        assert_eq!(fake.reactions(CHAT), [(id, vec![])]);
    }

    #[tokio::test]
    async fn menus_are_kept_per_two_letter_language_code_and_other_codes_refused() {
        let fake = FakeTelegram::start().await.unwrap();
        let menu = |code: Value| json!({"commands": [{"command": "new", "description": "x y z"}], "language_code": code});
        for (code, stored) in [(json!(""), None), (json!("ja"), Some("ja"))] {
            assert_eq!(call(&fake, "setMyCommands", menu(code)).await.0, 200);
            assert!(fake.commands(stored).is_some(), "{stored:?}");
        }
        for code in ["zh-TW", "zh-hant", "ZH", "jpn", "j"] {
            assert_eq!(
                call(&fake, "setMyCommands", menu(json!(code))).await,
                bad("Bad Request: invalid language code specified"),
                "{code}"
            );
            assert!(fake.commands(Some(code)).is_none());
        }
    }

    #[tokio::test]
    async fn webhook_info_shows_the_registered_url() {
        let fake = FakeTelegram::start().await.unwrap();
        let (status, body) = call(&fake, "getWebhookInfo", json!({})).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["result"]["url"], "");
        let hook = json!({"url": "https://bot.example.com/hook", "secret_token": "s"});
        assert_eq!(call(&fake, "setWebhook", hook).await.0, 200);
        let (_, body) = call(&fake, "getWebhookInfo", json!({})).await;
        assert_eq!(body["result"]["url"], "https://bot.example.com/hook");
        assert_eq!(body["result"]["pending_update_count"], 0);
    }

    #[tokio::test]
    async fn without_parse_mode_the_text_is_kept_as_sent() {
        let fake = FakeTelegram::start().await.unwrap();
        let params = json!({"chat_id": CHAT, "text": "<b>a & b"});
        let (status, body) = call(&fake, "sendMessage", params).await;
        assert_eq!(status, 200);
        assert_eq!(body["result"]["text"], "<b>a & b");
        assert!(body["result"].get("entities").is_none());
        assert_eq!(fake.bot_messages(CHAT)[0].entities, []);
        assert_eq!(fake.calls()[0].parse_mode(), None);
    }

    #[tokio::test]
    async fn malformed_html_markdown_and_empty_visible_texts_are_refused_and_store_nothing() {
        let fake = FakeTelegram::start().await.unwrap();
        assert_eq!(
            send_html(&fake, "<b>bold").await,
            bad(
                "Bad Request: can't parse entities: Can't find end tag corresponding to start tag \"b\""
            )
        );
        assert_eq!(
            send_html(&fake, "1 < 2").await,
            bad("Bad Request: can't parse entities: Unsupported start tag \"\" at byte offset 2")
        );
        assert_eq!(
            send_html(&fake, "<b> </b><i></i>").await,
            bad("Bad Request: message text is empty")
        );
        let markdown = json!({"chat_id": CHAT, "text": "*b*", "parse_mode": "MarkdownV2"});
        assert_eq!(
            call(&fake, "sendMessage", markdown).await,
            bad("Bad Request: unsupported parse_mode")
        );
        assert!(fake.bot_messages(CHAT).is_empty());
    }

    #[tokio::test]
    async fn the_length_limit_counts_the_visible_text() {
        let fake = FakeTelegram::start().await.unwrap();
        // 4096 visible units (2048 emoji of two units each), far more bytes with the tags.
        let full = format!("<b>{}</b>", "&#x1F600;".repeat(2048));
        assert_eq!(send_html(&fake, &full).await.0, 200);
        let message = &fake.bot_messages(CHAT)[0];
        assert_eq!(message.text.encode_utf16().count(), MAX_TEXT_UTF16);
        assert_eq!(message.entities, [Entity::new("bold", 0, MAX_TEXT_UTF16)]);
        let over = format!("<b>{}</b>x", "😀".repeat(2048));
        assert_eq!(
            send_html(&fake, &over).await,
            bad("Bad Request: message is too long")
        );
    }

    #[tokio::test]
    async fn an_edit_with_the_same_text_and_entities_is_not_modified_but_new_entities_are_a_change()
    {
        let fake = FakeTelegram::start().await.unwrap();
        let (_, sent) = send_html(&fake, "<b>done</b>").await;
        let id = sent["result"]["message_id"].clone();
        let edit = |text: &str| json!({"chat_id": CHAT, "message_id": id, "text": text, "parse_mode": "html"});
        assert_eq!(
            call(&fake, "editMessageText", edit("<strong>done</strong>")).await,
            bad(NOT_MODIFIED),
            "another spelling of the same entities"
        );
        let (status, body) = call(&fake, "editMessageText", edit("<i>done</i>")).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body["result"]["entities"],
            json!([{"type": "italic", "offset": 0, "length": 4}])
        );
        // Dropping the entities is a change too; then the plain text is not one.
        let plain = json!({"chat_id": CHAT, "message_id": id, "text": "done"});
        assert_eq!(call(&fake, "editMessageText", plain.clone()).await.0, 200);
        assert_eq!(
            call(&fake, "editMessageText", plain).await,
            bad(NOT_MODIFIED)
        );
        let message = &fake.bot_messages(CHAT)[0];
        assert_eq!((message.text.as_str(), message.edits), ("done", 2));
        assert!(message.entities.is_empty());
    }

    #[tokio::test]
    async fn a_caption_is_parsed_with_its_own_limit() {
        let fake = FakeTelegram::start().await.unwrap();
        let photo = fake.add_file(b"png".to_vec());
        let with = |caption: &str| json!({"chat_id": CHAT, "photo": photo, "caption": caption, "parse_mode": "HTML"});
        let (status, body) = call(&fake, "sendPhoto", with("<u>sky</u> &lt;3")).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["result"]["caption"], "sky <3");
        assert_eq!(
            body["result"]["caption_entities"],
            json!([{"type": "underline", "offset": 0, "length": 3}])
        );
        assert_eq!(
            fake.bot_messages(CHAT)[0].entities,
            [Entity::new("underline", 0, 3)]
        );
        let long = format!("<b>{}</b>", "a".repeat(MAX_CAPTION_UTF16));
        assert_eq!(call(&fake, "sendPhoto", with(&long)).await.0, 200);
        assert_eq!(
            call(&fake, "sendPhoto", with(&format!("{long}!"))).await,
            bad("Bad Request: message caption is too long")
        );
        assert_eq!(
            call(&fake, "sendPhoto", with("<i>oops")).await,
            bad(
                "Bad Request: can't parse entities: Can't find end tag corresponding to start tag \"i\""
            )
        );
        assert_eq!(fake.bot_messages(CHAT).len(), 2);
    }
}
