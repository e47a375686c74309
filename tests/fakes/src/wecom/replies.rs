//! Replies and proactive messages ("回复消息" and "主动推送消息" of document/path/101463, the
//! 被动回复消息 page 101031 for the bodies).
//!
//! - `aibot_respond_msg` answers a message callback: its `req_id` must be one pushed as
//!   `aibot_msg_callback` on this same connection (else `846605 invalid req_id`, observed:
//!   for an unknown one, one from before a reconnect, an event's), within
//!   [`REPLY_WINDOW`] of the push (documented 24 h; the fake answers 846605 after it).
//!   Its `msgtype` is one the page lists for the long connection: `stream`,
//!   `template_card`, `stream_with_template_card`, `markdown`, `file`, `image`, `voice`,
//!   `video` (anything else, `text` included, is 40058).
//! - A stream is `{msgtype: stream, stream: {id, finish?, content?, feedback?}}`, keyed by
//!   `stream.id` within its `req_id` (one callback may carry several streams, observed).
//!   `id` is required (the fake requires it on every frame, as the SDKs send it); `content`
//!   at most [`MAX_CONTENT_BYTES`] UTF-8 bytes and is the whole message as shown (each
//!   update replaces the last, documented); `msg_item` is refused ("目前暂不支持 msg_item
//!   字段", documented for the long connection); `feedback.id` at most
//!   [`MAX_FEEDBACK_ID_BYTES`]. After `finish: true` the stream takes no frame
//!   ([`code::STREAM_FINISHED`], fake code); past the stream window (six minutes, counted
//!   from the callback it answers: the user's message) `846608 stream message update
//!   expired` (observed). Past the window the callback takes no new stream either: its
//!   first frame is refused `846608` too (fake code: WeCom's plugin never opens another
//!   stream after 846608, it sends the text with `aibot_send_msg`, the stream channel of
//!   that `req_id` being unusable, monitor.ts / message-sender.ts).
//! - `aibot_respond_welcome_msg` answers an `enter_chat` event within
//!   [`EVENT_REPLY_WINDOW`] (documented: five seconds), once (the fake's), with `{msgtype:
//!   text, text: {content}}` or a `template_card`; `aibot_respond_update_msg` answers a
//!   `template_card_event` the same way with `{response_type: update_template_card,
//!   template_card, userids?}`.
//! - `aibot_send_msg {chatid, chat_type?, msgtype, …}` needs a conversation that wrote to
//!   the bot (documented; [`code::CHAT_NOT_ALLOWED`], fake code) and a `msgtype` of
//!   `markdown` (content at most [`MAX_CONTENT_BYTES`]), `template_card`, `file`, `image`,
//!   `voice`, `video`.
//! - Media messages name a `media_id` the upload flow issued, of the message's type, within
//!   its three days ([`code::INVALID_MEDIA_ID`], fake code); the upload records where it
//!   was used.
//! - Every new message (a stream's first frame, any other reply, a welcome, a send) counts
//!   against its conversation's rate: [`MESSAGES_PER_MINUTE`] a minute and
//!   [`MESSAGES_PER_HOUR`] an hour (documented), beyond which `45009`. Stream updates do
//!   not count (observed: 31 frames of one stream in 8 s were all accepted).

use std::collections::VecDeque;

use serde_json::Value;
use tokio::time::Instant;

use super::long_connection::Answer;
use super::records::{Failure, MediaUse, Reply, Sent, Stream, StreamExpiry, Update};
use super::{
    Callback, MAX_CONTENT_BYTES, MAX_FEEDBACK_ID_BYTES, MEDIA_LIFETIME, MESSAGES_PER_HOUR,
    MESSAGES_PER_MINUTE, NEW_MESSAGE, Wecom, code,
};

const MINUTE: std::time::Duration = std::time::Duration::from_secs(60);
const HOUR: std::time::Duration = std::time::Duration::from_secs(3600);

/// The media message types.
const MEDIA: &[&str] = &["file", "image", "voice", "video"];

/// A reply or send command of connection `id`.
pub(super) fn handle(
    s: &mut Wecom,
    id: u64,
    cmd: &str,
    req_id: &str,
    body: &Value,
) -> Result<Answer, i64> {
    match cmd {
        "aibot_send_msg" => send(s, body),
        "aibot_respond_msg" => respond(s, id, req_id, body),
        _ => answer_event(s, id, cmd, req_id, body),
    }
}

/// A string field that is not empty.
fn text<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key)?.as_str().filter(|t| !t.is_empty())
}

/// Checks a content's byte limit.
fn fits(content: &str) -> Result<(), i64> {
    if content.len() > MAX_CONTENT_BYTES {
        Err(code::INVALID_PARAMETER)
    } else {
        Ok(())
    }
}

/// Checks an optional `feedback.id`.
fn feedback_fits(holder: &Value) -> Result<Option<String>, i64> {
    match holder.get("feedback").map(|f| &f["id"]) {
        None => Ok(None),
        Some(Value::String(id)) if id.len() <= MAX_FEEDBACK_ID_BYTES => Ok(Some(id.clone())),
        Some(_) => Err(code::INVALID_PARAMETER),
    }
}

/// Counts a call at `now` in `times` (the last hour's), unless `per_minute` were already
/// made in the last minute or `per_hour` in the last hour; whether it was counted.
pub(super) fn within_rate(
    times: &mut VecDeque<Instant>,
    now: Instant,
    per_minute: usize,
    per_hour: usize,
) -> bool {
    while times
        .front()
        .is_some_and(|t| now.duration_since(*t) >= HOUR)
    {
        times.pop_front();
    }
    let last_minute = times
        .iter()
        .filter(|t| now.duration_since(**t) < MINUTE)
        .count();
    if last_minute >= per_minute || times.len() >= per_hour {
        return false;
    }
    times.push_back(now);
    true
}

/// Counts a new message to `conversation`, or refuses it for the rate (or as a test
/// scripted: [`FakeWecom::refuse_messages`](super::FakeWecom::refuse_messages)).
fn take_rate(s: &mut Wecom, conversation: &str) -> Result<(), i64> {
    s.failures.count(NEW_MESSAGE);
    if let Some(Failure::Code(errcode, _)) = s.failures.take(NEW_MESSAGE, None) {
        return Err(errcode);
    }
    let now = s.now();
    let times = s.rates.entry(conversation.to_owned()).or_default();
    if !within_rate(times, now, MESSAGES_PER_MINUTE, MESSAGES_PER_HOUR) {
        s.rate_refusals += 1;
        return Err(code::FREQ_OUT_OF_LIMIT);
    }
    Ok(())
}

/// Checks the body of a `msgtype` that is no stream (shared by replies and sends), and for
/// media the `media_id`; records the use.
fn check_other(s: &mut Wecom, msgtype: &str, body: &Value, used: MediaUse) -> Result<(), i64> {
    match msgtype {
        "markdown" => {
            let content = text(&body["markdown"], "content").ok_or(code::INVALID_PARAMETER)?;
            fits(content)?;
            feedback_fits(&body["markdown"])?;
        }
        "template_card" => {
            text(&body["template_card"], "card_type").ok_or(code::INVALID_PARAMETER)?;
        }
        t if MEDIA.contains(&t) => {
            let media_id = text(&body[t], "media_id").ok_or(code::INVALID_PARAMETER)?;
            let now = s.now();
            let upload = s
                .uploads
                .iter_mut()
                .find(|u| u.media_id.as_deref() == Some(media_id))
                .filter(|u| u.kind == t)
                .filter(|u| {
                    u.finished_at
                        .is_some_and(|at| now.duration_since(at) < MEDIA_LIFETIME)
                })
                .ok_or(code::INVALID_MEDIA_ID)?;
            upload.used_in.push(used);
        }
        _ => return Err(code::INVALID_PARAMETER),
    }
    Ok(())
}

/// `aibot_respond_msg`.
fn respond(s: &mut Wecom, id: u64, req_id: &str, body: &Value) -> Result<Answer, i64> {
    let now = s.now();
    let window = s.reply_window;
    let cb = s
        .callbacks
        .get(req_id)
        .filter(|cb| cb.kind == "aibot_msg_callback" && cb.connection == Some(id))
        .filter(|cb| now.duration_since(cb.at) <= window)
        .cloned()
        .ok_or(code::INVALID_REQ_ID)?;
    let msgtype = text(body, "msgtype").ok_or(code::INVALID_PARAMETER)?;
    if msgtype == "stream" || msgtype == "stream_with_template_card" {
        return stream(s, id, req_id, &cb, body);
    }
    let used = MediaUse::Reply {
        req_id: req_id.to_owned(),
    };
    // Checked before the rate is taken, so a refused body uses none of it.
    check_other(s, msgtype, body, used.clone())?;
    if let Err(errcode) = take_rate(s, &cb.conversation) {
        unuse(s, &used);
        return Err(errcode);
    }
    s.replies.push(Reply {
        cmd: "aibot_respond_msg".into(),
        req_id: req_id.to_owned(),
        msgtype: msgtype.to_owned(),
        body: body.clone(),
        conversation: cb.conversation,
        at: Instant::now(),
    });
    Ok(Answer::ok())
}

/// Takes back the use a refused message recorded.
fn unuse(s: &mut Wecom, used: &MediaUse) {
    for upload in &mut s.uploads {
        if upload.used_in.last() == Some(used) {
            upload.used_in.pop();
            return;
        }
    }
}

/// A stream frame answering the callback `req_id` (`cb`).
fn stream(
    s: &mut Wecom,
    id: u64,
    req_id: &str,
    cb: &Callback,
    body: &Value,
) -> Result<Answer, i64> {
    let frame = &body["stream"];
    let stream_id = text(frame, "id").ok_or(code::INVALID_PARAMETER)?;
    let finish = match frame.get("finish") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(code::INVALID_PARAMETER),
    };
    let content = match frame.get("content") {
        None => "",
        Some(Value::String(c)) => c.as_str(),
        Some(_) => return Err(code::INVALID_PARAMETER),
    };
    let index = s
        .streams
        .iter()
        .position(|st| st.req_id == req_id && st.stream_id == stream_id);
    let refused = |s: &mut Wecom, errcode: i64| {
        if let Some(i) = index {
            s.streams[i].refused.push((errcode, content.to_owned()));
        }
        Err(errcode)
    };
    if fits(content).is_err() || frame.get("msg_item").is_some() {
        return refused(s, code::INVALID_PARAMETER);
    }
    if body["msgtype"] == "stream_with_template_card"
        && body.get("template_card").is_some_and(|c| !c.is_object())
    {
        return refused(s, code::INVALID_PARAMETER);
    }
    let feedback_id = match feedback_fits(frame) {
        Ok(f) => f,
        Err(e) => return refused(s, e),
    };
    let now = s.now();
    let update = Update {
        content: content.to_owned(),
        finish,
        at: now,
    };
    let (window, expiry, refuse_shrinking) = (s.stream_window, s.stream_expiry, s.refuse_shrinking);
    let Some(i) = index else {
        let spent = match expiry {
            StreamExpiry::SinceCallback => now.duration_since(cb.at) > window,
            StreamExpiry::SinceLast => s
                .streams
                .iter()
                .filter(|st| st.req_id == req_id)
                .any(|st| st.expired(now, window, expiry, cb.at)),
        };
        if spent {
            return Err(code::STREAM_EXPIRED);
        }
        take_rate(s, &cb.conversation)?;
        s.streams.push(Stream {
            req_id: req_id.to_owned(),
            msgid: cb.msgid.clone(),
            stream_id: stream_id.to_owned(),
            conversation: cb.conversation.clone(),
            connection: id,
            updates: vec![update],
            finished: finish,
            feedback_id,
            refused: Vec::new(),
            shrank: false,
        });
        return Ok(Answer::ok());
    };
    let st = &s.streams[i];
    if st.finished {
        return refused(s, code::STREAM_FINISHED);
    }
    if st.expired(now, window, expiry, cb.at) {
        return refused(s, code::STREAM_EXPIRED);
    }
    let shrinks = !content.starts_with(st.content().as_str());
    if shrinks && refuse_shrinking {
        return refused(s, code::INVALID_PARAMETER);
    }
    let st = &mut s.streams[i];
    st.shrank |= shrinks;
    st.finished = finish;
    st.updates.push(update);
    Ok(Answer::ok())
}

impl Stream {
    /// Whether the stream is past its `window` at `now`, measured as `expiry` says (from
    /// `callback`, when the callback it answers went out, or from its last frame).
    fn expired(
        &self,
        now: Instant,
        window: std::time::Duration,
        expiry: StreamExpiry,
        callback: Instant,
    ) -> bool {
        let since = match expiry {
            StreamExpiry::SinceCallback => callback,
            StreamExpiry::SinceLast => self.updates.last().map_or(now, |u| u.at),
        };
        now.duration_since(since) > window
    }
}

/// `aibot_respond_welcome_msg` (for `enter_chat`) and `aibot_respond_update_msg` (for
/// `template_card_event`).
fn answer_event(
    s: &mut Wecom,
    id: u64,
    cmd: &str,
    req_id: &str,
    body: &Value,
) -> Result<Answer, i64> {
    let (event, kind) = if cmd == "aibot_respond_welcome_msg" {
        ("enter_chat", text(body, "msgtype"))
    } else {
        ("template_card_event", text(body, "response_type"))
    };
    let now = s.now();
    let window = s.event_reply_window;
    let cb = s
        .callbacks
        .get(req_id)
        .filter(|cb| cb.kind == event && cb.connection == Some(id))
        .filter(|cb| now.duration_since(cb.at) <= window)
        .cloned()
        .ok_or(code::INVALID_REQ_ID)?;
    if cb.answered {
        return Err(code::ALREADY_REPLIED);
    }
    let kind = kind.ok_or(code::INVALID_PARAMETER)?;
    let card = || {
        text(&body["template_card"], "card_type")
            .map(|_| ())
            .ok_or(code::INVALID_PARAMETER)
    };
    match (event, kind) {
        ("enter_chat", "text") => {
            let content = text(&body["text"], "content").ok_or(code::INVALID_PARAMETER)?;
            fits(content)?;
        }
        ("enter_chat", "template_card") | ("template_card_event", "update_template_card") => {
            card()?;
        }
        _ => return Err(code::INVALID_PARAMETER),
    }
    if let Some(userids) = body.get("userids") {
        let all_text = userids
            .as_array()
            .is_some_and(|ids| ids.iter().all(Value::is_string));
        if !all_text {
            return Err(code::INVALID_PARAMETER);
        }
    }
    take_rate(s, &cb.conversation)?;
    if let Some(cb) = s.callbacks.get_mut(req_id) {
        cb.answered = true;
    }
    s.replies.push(Reply {
        cmd: cmd.to_owned(),
        req_id: req_id.to_owned(),
        msgtype: kind.to_owned(),
        body: body.clone(),
        conversation: cb.conversation,
        at: Instant::now(),
    });
    Ok(Answer::ok())
}

/// `aibot_send_msg`.
fn send(s: &mut Wecom, body: &Value) -> Result<Answer, i64> {
    let chatid = text(body, "chatid").ok_or(code::INVALID_PARAMETER)?;
    let chat_type = match body.get("chat_type") {
        None => None,
        Some(v) => Some(
            v.as_i64()
                .filter(|t| [1, 2].contains(t))
                .ok_or(code::INVALID_PARAMETER)?,
        ),
    };
    let msgtype = text(body, "msgtype").ok_or(code::INVALID_PARAMETER)?;
    if !s.conversations.contains(chatid) {
        return Err(code::CHAT_NOT_ALLOWED);
    }
    let used = MediaUse::Send {
        chatid: chatid.to_owned(),
    };
    check_other(s, msgtype, body, used.clone())?;
    if let Err(errcode) = take_rate(s, chatid) {
        unuse(s, &used);
        return Err(errcode);
    }
    s.sent.push(Sent {
        chatid: chatid.to_owned(),
        chat_type,
        msgtype: msgtype.to_owned(),
        body: body.clone(),
        at: Instant::now(),
    });
    Ok(Answer::ok())
}
