//! Messages: `chat.postMessage`, `chat.update`, `reactions.add` and the streaming methods
//! (`chat.startStream`, `chat.appendStream`, `chat.stopStream`), with the rules the
//! bridge depends on.
//!
//! - A channel must be one the fake knows (pushed in an event, or added by the test), else
//!   `channel_not_found`: the fake does not open DMs from user ids.
//! - A message needs a non-blank `text`, `blocks` or `attachments` (`no_text`); a `text`
//!   is at most [`MAX_TEXT_CHARS`] characters (Slack documents truncating beyond it with a
//!   `message_truncated` warning, and lists `msg_too_long`; the fake refuses unless told to
//!   truncate).
//! - A `thread_ts` must look like a `ts` (`invalid_thread_ts`) and name a root message of
//!   the channel (`thread_not_found`). Slack says to avoid a reply's `ts` ("use its
//!   parent's"); the fake refuses it, stricter than Slack.
//! - `chat.update`: a known message (`message_not_found`) the bot wrote
//!   (`cant_update_message`), a `text` of at most [`MAX_UPDATE_BYTES`] (`msg_too_long`,
//!   truncation or not), edited at most once per [`EDIT_PACE`] (429 `ratelimited` with
//!   `Retry-After`; the pace is the fake's, see [`FakeSlack::set_edit_pace`]).
//! - `reactions.add`: `channel` and `timestamp` (`no_item_specified`) of a known message
//!   (`message_not_found`), a name without colons or spaces (`invalid_name`), once per
//!   name (`already_reacted`).
//! - Streams: `markdown_text` at most [`MAX_MARKDOWN_CHARS`] per call (`msg_too_long`);
//!   outside a DM both `recipient_user_id` and `recipient_team_id` (documented as "required
//!   when streaming to channels"); appends and the stop only while the stream is open
//!   (`message_not_in_streaming_state`). Slack also ends a stream on its own after about
//!   five minutes; the fake does not.
//!
//! [`FakeSlack::set_edit_pace`]: super::FakeSlack::set_edit_pace

use serde_json::{Value, json};
use tokio::time::Instant;

use super::events::next_ts;
use super::rest::{Params, error, ok, rate_limited};
use super::{
    APP_ID, BOT_ID, BOT_NAME, BOT_USER_ID, Edit, MAX_MARKDOWN_CHARS, MAX_TEXT_CHARS,
    MAX_UPDATE_BYTES, Message, Reaction, Slack, Stream, TEAM_ID, code,
};
use crate::skeleton::http::Answer;

#[cfg(doc)]
use super::EDIT_PACE;

/// The message object Slack answers for a bot message.
pub(super) fn message_json(m: &Message) -> Value {
    let mut message = json!({
        "type": "message", "text": m.text, "user": m.user, "bot_id": BOT_ID, "app_id": APP_ID,
        "ts": m.ts, "team": TEAM_ID,
        "bot_profile": {"id": BOT_ID, "app_id": APP_ID, "name": BOT_NAME, "team_id": TEAM_ID},
    });
    if !m.blocks.is_null() {
        message["blocks"] = m.blocks.clone();
    }
    if let Some(thread_ts) = &m.thread_ts {
        message["thread_ts"] = json!(thread_ts);
        message["parent_user_id"] = json!(BOT_USER_ID);
    }
    message
}

/// The `channel` parameter, when the fake knows it.
fn channel<'a>(s: &Slack, p: &'a Params) -> Result<&'a str, Answer> {
    p.text("channel")
        .filter(|c| s.channels.contains_key(*c))
        .ok_or_else(|| error(code::CHANNEL_NOT_FOUND))
}

/// Whether `ts` is written as Slack writes one: digits, a dot, digits.
fn is_ts(ts: &str) -> bool {
    ts.split_once('.').is_some_and(|(a, b)| {
        !a.is_empty() && !b.is_empty() && (a.chars().chain(b.chars())).all(|c| c.is_ascii_digit())
    })
}

/// The `thread_ts` parameter, checked against the channel's root messages.
pub(super) fn check_thread(s: &Slack, channel: &str, p: &Params) -> Result<Option<String>, Answer> {
    let Some(thread_ts) = p.text("thread_ts") else {
        return Ok(None);
    };
    if !is_ts(thread_ts) {
        return Err(error(code::INVALID_THREAD_TS));
    }
    match s.message(channel, thread_ts) {
        Some(root) if root.is_root() => Ok(Some(thread_ts.to_owned())),
        _ => Err(error(code::THREAD_NOT_FOUND)),
    }
}

/// `text` within [`MAX_TEXT_CHARS`]: as is, cut when the fake truncates (then `true`),
/// else `msg_too_long`.
fn within_limit(s: &Slack, text: &str) -> Result<(String, bool), Answer> {
    if text.chars().count() <= MAX_TEXT_CHARS {
        Ok((text.to_owned(), false))
    } else if s.truncate_long_text {
        Ok((text.chars().take(MAX_TEXT_CHARS).collect(), true))
    } else {
        Err(error(code::MSG_TOO_LONG))
    }
}

/// The message's `text` and `blocks`: `no_text` when it has neither (nor attachments).
fn content(s: &Slack, p: &Params) -> Result<(String, Value, bool), Answer> {
    let text = p.str("text").unwrap_or("");
    let filled = |key: &str| {
        p.json(key)
            .is_some_and(|v| v.as_array().is_some_and(|a| !a.is_empty()))
    };
    let blocks = p.json("blocks").filter(|_| filled("blocks"));
    if text.trim().is_empty() && blocks.is_none() && !filled("attachments") {
        return Err(error(code::NO_TEXT));
    }
    let (text, truncated) = within_limit(s, text)?;
    Ok((text, blocks.unwrap_or(Value::Null), truncated))
}

fn truncation_warning(answer: &mut Value) {
    answer["warning"] = json!("message_truncated");
    answer["response_metadata"] = json!({
        "warnings": ["message_truncated"],
        "messages": [concat!("[WARN] Your message was truncated but still posted. ",
                             "The `text` field accepts up to 40,000 characters.")],
    });
}

/// `chat.postMessage {channel, text, blocks, thread_ts, mrkdwn}`.
pub(super) fn post(s: &mut Slack, p: &Params) -> Answer {
    let checked = channel(s, p).and_then(|channel| {
        let (text, blocks, truncated) = content(s, p)?;
        let thread_ts = check_thread(s, channel, p)?;
        Ok((channel, text, blocks, truncated, thread_ts))
    });
    let (channel, text, blocks, truncated, thread_ts) = match checked {
        Ok(checked) => checked,
        Err(answer) => return answer,
    };
    let mut message = Message::new(channel, &next_ts(), BOT_USER_ID, true);
    message.text = text;
    message.blocks = blocks;
    message.thread_ts = thread_ts;
    message.mrkdwn = p.bool("mrkdwn");
    let mut answer =
        json!({"channel": channel, "ts": message.ts, "message": message_json(&message)});
    if truncated {
        truncation_warning(&mut answer);
    }
    s.messages.push(message);
    ok(answer)
}

/// The index of the message `ts` of the `channel` parameter.
fn find(s: &Slack, p: &Params, ts_key: &str) -> Result<usize, Answer> {
    let channel = channel(s, p)?;
    let ts = p.text(ts_key).unwrap_or("");
    s.messages
        .iter()
        .position(|m| m.channel == channel && m.ts == ts)
        .ok_or_else(|| error(code::MESSAGE_NOT_FOUND))
}

/// `chat.update {channel, ts, text, blocks}`.
pub(super) fn update(s: &mut Slack, p: &Params) -> Answer {
    let index = match find(s, p, "ts") {
        Ok(index) => index,
        Err(answer) => return answer,
    };
    if !s.messages[index].bot {
        return error(code::CANT_UPDATE_MESSAGE);
    }
    if p.str("text").is_some_and(|t| t.len() > MAX_UPDATE_BYTES) {
        return error(code::MSG_TOO_LONG);
    }
    let (text, blocks, truncated) = match content(s, p) {
        Ok(content) => content,
        Err(answer) => return answer,
    };
    let now = Instant::now();
    let key = (
        s.messages[index].channel.clone(),
        s.messages[index].ts.clone(),
    );
    if let (Some(pace), Some(last)) = (s.edit_pace, s.last_edit.get(&key)) {
        let next = *last + pace;
        if now < next {
            s.rate_refusals += 1;
            return rate_limited(next - now);
        }
    }
    s.last_edit.insert(key, now);
    let message = &mut s.messages[index];
    message.text.clone_from(&text);
    message.blocks = blocks.clone();
    message.edits.push(Edit {
        text: text.clone(),
        blocks,
        at: now,
    });
    let mut answer = json!({"channel": message.channel, "ts": message.ts, "text": text,
                            "message": message_json(message)});
    if truncated {
        truncation_warning(&mut answer);
    }
    ok(answer)
}

/// `reactions.add {channel, timestamp, name}`.
pub(super) fn react(s: &mut Slack, p: &Params) -> Answer {
    if let Some((calls, window)) = s.reaction_limit {
        let now = Instant::now();
        while s
            .reaction_calls
            .front()
            .is_some_and(|at| now.duration_since(*at) >= window)
        {
            s.reaction_calls.pop_front();
        }
        if s.reaction_calls.len() >= calls {
            s.rate_refusals += 1;
            let oldest = s.reaction_calls.front().copied().unwrap_or(now);
            return rate_limited((oldest + window).saturating_duration_since(now));
        }
        s.reaction_calls.push_back(now);
    }
    if p.text("channel").is_none() || p.text("timestamp").is_none() {
        return error(code::NO_ITEM_SPECIFIED);
    }
    let index = match find(s, p, "timestamp") {
        Ok(index) => index,
        Err(answer) => return answer,
    };
    let name = p.str("name").unwrap_or("");
    if name.is_empty() || name.contains(':') || name.contains(char::is_whitespace) {
        return error(code::INVALID_NAME);
    }
    let (channel, ts) = (&s.messages[index].channel, &s.messages[index].ts);
    if s.reactions
        .iter()
        .any(|r| r.channel == *channel && r.timestamp == *ts && r.name == name)
    {
        return error(code::ALREADY_REACTED);
    }
    let reaction = Reaction {
        channel: channel.clone(),
        timestamp: ts.clone(),
        name: name.to_owned(),
        at: Instant::now(),
    };
    s.reactions.push(reaction);
    ok(json!({}))
}

/// A stream call's markdown: `markdown_text` and the text of `markdown_text` chunks, at
/// most [`MAX_MARKDOWN_CHARS`] each.
fn markdown(p: &Params) -> Result<Option<String>, Answer> {
    let mut parts: Vec<String> = p
        .str("markdown_text")
        .map(str::to_owned)
        .into_iter()
        .collect();
    for chunk in p
        .json("chunks")
        .and_then(|c| c.as_array().cloned())
        .unwrap_or_default()
    {
        if chunk["type"] == "markdown_text"
            && let Some(text) = chunk["text"].as_str()
        {
            parts.push(text.to_owned());
        }
    }
    if parts.iter().any(|t| t.chars().count() > MAX_MARKDOWN_CHARS) {
        return Err(error(code::MSG_TOO_LONG));
    }
    Ok((!parts.is_empty()).then(|| parts.concat()))
}

/// `chat.startStream {channel, thread_ts, markdown_text, recipient_user_id,
/// recipient_team_id}` → `{channel, ts}`.
pub(super) fn start_stream(s: &mut Slack, p: &Params) -> Answer {
    let checked = channel(s, p).and_then(|channel| {
        let thread_ts = check_thread(s, channel, p)?;
        if s.channels.get(channel).is_some_and(|kind| kind != "im") {
            if p.text("recipient_user_id").is_none() {
                return Err(error(code::MISSING_RECIPIENT_USER_ID));
            }
            if p.text("recipient_team_id").is_none() {
                return Err(error(code::MISSING_RECIPIENT_TEAM_ID));
            }
        }
        Ok((channel, thread_ts, markdown(p)?))
    });
    let (channel, thread_ts, first) = match checked {
        Ok(checked) => checked,
        Err(answer) => return answer,
    };
    let mut message = Message::new(channel, &next_ts(), BOT_USER_ID, true);
    message.thread_ts = thread_ts;
    message.text = first.clone().unwrap_or_default();
    message.stream = Some(Stream {
        open: true,
        chunks: first.into_iter().collect(),
        recipient_user_id: p.str("recipient_user_id").map(str::to_owned),
        recipient_team_id: p.str("recipient_team_id").map(str::to_owned),
        stopped_at: None,
    });
    let answer = json!({"channel": channel, "ts": message.ts});
    s.messages.push(message);
    ok(answer)
}

/// The open stream `ts` of the `channel` parameter, and the call's markdown.
fn open_stream(s: &mut Slack, p: &Params) -> Result<(usize, Option<String>), Answer> {
    let index = find(s, p, "ts")?;
    match &s.messages[index].stream {
        None => Err(error(code::MESSAGE_NOT_FOUND)),
        Some(stream) if !stream.open => Err(error(code::NOT_STREAMING)),
        Some(_) => Ok((index, markdown(p)?)),
    }
}

/// Adds `text` to the stream of message `index`.
fn append(s: &mut Slack, index: usize, text: String) {
    let message = &mut s.messages[index];
    message.text.push_str(&text);
    if let Some(stream) = &mut message.stream {
        stream.chunks.push(text);
    }
}

/// `chat.appendStream {channel, ts, markdown_text}`.
pub(super) fn append_stream(s: &mut Slack, p: &Params) -> Answer {
    match open_stream(s, p) {
        Err(answer) => answer,
        Ok((_, None)) => error(code::INVALID_ARGUMENTS),
        Ok((index, Some(text))) => {
            append(s, index, text);
            let m = &s.messages[index];
            ok(json!({"channel": m.channel, "ts": m.ts}))
        }
    }
}

/// `chat.stopStream {channel, ts, markdown_text?, blocks?}`.
pub(super) fn stop_stream(s: &mut Slack, p: &Params) -> Answer {
    let (index, last) = match open_stream(s, p) {
        Ok(found) => found,
        Err(answer) => return answer,
    };
    if let Some(text) = last {
        append(s, index, text);
    }
    let message = &mut s.messages[index];
    if let Some(blocks) = p.json("blocks") {
        message.blocks = blocks;
    }
    if let Some(stream) = &mut message.stream {
        stream.open = false;
        stream.stopped_at = Some(Instant::now());
    }
    ok(json!({"channel": message.channel, "ts": message.ts, "message": message_json(message)}))
}
