//! The DingTalk channel: stream mode in, robot messages (or an AI card) out.
//!
//! - **In**: each robot message of the stream is normalized and offered to the daemon's
//!   queue before its ack goes back; one the daemon cannot take now (shutting down,
//!   overloaded) is acked 500, so DingTalk delivers it again, possibly to another replica.
//! - **Out, without a card template**: final-only. A reply is a `sampleMarkdown` message
//!   (the agent's Markdown adapted to what DingTalk renders, [`DingTalkMarkdown`](crate::DingTalkMarkdown)),
//!   to the group or, in a one-to-one chat, to the user; a long answer is several messages
//!   of at most `max_markdown_bytes`. The manager's "working on it" notice, sent when the
//!   answer takes more than a moment, is a message of its own.
//! - **Out, with `card_template_id`**: the reply streams into an AI card: the card is
//!   created and delivered with the first text, updated with the full text as it grows
//!   (paced by the delivery engine), and finalized with the final. DingTalk's answer to
//!   every card call is checked; when the card cannot be created the reply is a markdown
//!   message, and when the final cannot be written into it the delivery engine sends it as
//!   one: the user gets the answer exactly once either way. A card whose creation met
//!   network or server trouble may exist all the same (DingTalk acted, its answer was
//!   lost): the next stream start, or the final, for that message first tries to write
//!   into it, so it is not left showing "working" beside a second card or message.
//! - **Files**: presented files are uploaded (≤ 20 MB) and sent as image or file messages;
//!   files users send are downloaded through `messageFiles/download`.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use im_bridge_channel::{
    AdmitError, AllowedUsers, BuildContext, Capabilities, Channel, ChannelError, ChannelExit,
    ChannelIdentity, ChannelResult, ChatKind, CommandVocabulary, InboundFile, InboundSink,
    LengthUnit, MessageId, OutboundFile, RateBudget, RetryAfterHint, SendTarget, SentMessage,
    Stage, Telemetry, UpdateMode, Writes, fetch_handle, http, transport_ended,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::NAME;
use crate::api::{
    self, Api, IMAGE_TYPES, MAX_UPLOAD_BYTES, MediaType, NewCard, Recipient, RobotMessage,
    file_type,
};
use crate::config::DingTalkSettings;
use crate::inbound::{InboundContext, normalize_data, parse_handle};
use crate::markup::DingTalkMarkdown;
use crate::transport::ws::{self, Dropped, EventHandler, StreamSettings, Timers, Verdict};
use im_bridge_channel::Skip;

/// The longest title of a markdown message (what the chat list and notifications show).
const TITLE_CHARS: usize = 24;

/// The DingTalk channel. `Debug` shows no secret (the settings' secret is a `Secret`, the
/// client's token cache shows none).
#[derive(Debug)]
pub struct DingTalkChannel {
    identity: ChannelIdentity,
    settings: DingTalkSettings,
    api: Api,
    http: reqwest::Client,
    allowed_users: AllowedUsers,
    commands: CommandVocabulary,
    telemetry: Telemetry,
    /// Cards whose creation met network or server trouble (they may exist), by the chat and
    /// message they answer ([`card_key`]), newest last, at most [`UNCERTAIN_CARDS`].
    uncertain_cards: Mutex<VecDeque<(String, String)>>,
}

/// Cards remembered as maybe created (see [`DingTalkChannel::uncertain_cards`]).
const UNCERTAIN_CARDS: usize = 64;

/// The app as a whole, per API: an enterprise-internal app may call each server API at most
/// 20 times a second (DingTalk's "调用频率限制", <https://open.dingtalk.com/document/orgapp/invocation-frequency-limit>).
/// Robot messages (`groupMessages/send`, `oToMessages/batchSend`, a file's message too) and
/// AI-card updates (`card/streaming`) are budgets of their own, each kept at 15/s.
pub const RATE_BUDGETS: [RateBudget; 2] = [
    RateBudget::per_second("messages", Writes::MESSAGES_FILES, 10, 15),
    RateBudget::per_second("card_updates", Writes::EDITS, 10, 15),
];

/// What DingTalk can show: markdown messages of `max_markdown_bytes`, final-only; with a
/// card template, one AI card updated in place about once a second, which shows it is
/// being written until its last update says it is finished.
pub fn capabilities(settings: &DingTalkSettings) -> Capabilities {
    let base = Capabilities {
        length_unit: LengthUnit::Bytes,
        rate_budgets: &RATE_BUDGETS,
        working_placeholder: true,
        markup: &DingTalkMarkdown,
        max_upload_bytes: MAX_UPLOAD_BYTES,
        ..Capabilities::final_only(settings.max_markdown_bytes)
    };
    match settings.card_template_id {
        Some(_) => Capabilities {
            updates: UpdateMode::Card,
            min_edit_interval_private: Duration::from_secs(1),
            min_edit_interval_group: Duration::from_secs(1),
            finish_closes_stream: true,
            ..base
        },
        None => base,
    }
}

impl DingTalkChannel {
    /// A channel with `settings`, the daemon's commands and who may talk to it.
    pub fn new(settings: DingTalkSettings, ctx: &BuildContext) -> ChannelResult<Self> {
        let api = Api::from_settings(&settings).map_err(ChannelError::from)?;
        let http = http::client().map_err(ChannelError::from)?;
        let telemetry = Telemetry::new(NAME);
        Ok(Self {
            // DingTalk gives each message to one connection of the app: every replica
            // connects.
            identity: ChannelIdentity::new(&telemetry, capabilities(&settings)),
            settings,
            api,
            http,
            allowed_users: ctx.allowed_users.clone(),
            commands: ctx.commands.clone(),
            telemetry,
            uncertain_cards: Mutex::new(VecDeque::new()),
        })
    }

    /// Remembers that card `out_track_id`, answering `key`, may exist.
    fn card_uncertain(&self, key: String, out_track_id: String) {
        let mut cards = self
            .uncertain_cards
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        cards.retain(|(k, _)| *k != key);
        if cards.len() >= UNCERTAIN_CARDS {
            cards.pop_front();
        }
        cards.push_back((key, out_track_id));
    }

    /// The card that may exist for `key`, forgotten as it is taken.
    fn take_uncertain_card(&self, key: &str) -> Option<String> {
        let mut cards = self
            .uncertain_cards
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let at = cards.iter().position(|(k, _)| k == key)?;
        cards.remove(at).map(|(_, id)| id)
    }

    /// Writes `text` into the card that may exist for `to` (see the module docs), finishing
    /// it with `finalize`: the card's id when it does exist, `None` when there is none (or
    /// DingTalk refused the write: no such card). A write that met network or server trouble
    /// keeps the card in mind and fails for now, so the next try asks again.
    async fn write_uncertain_card(
        &self,
        to: &SendTarget<'_>,
        text: &str,
        finalize: bool,
    ) -> ChannelResult<Option<MessageId>> {
        let key = card_key(to);
        let Some(out_track_id) = self.take_uncertain_card(&key) else {
            return Ok(None);
        };
        match self.api.stream_card(&out_track_id, text, finalize).await {
            Ok(()) => {
                tracing::info!(
                    channel = NAME,
                    "A DingTalk card whose creation seemed to fail exists; the answer goes on in it."
                );
                Ok(Some(MessageId::new(out_track_id)))
            }
            Err(error) => {
                let error = ChannelError::from(error);
                if !error.is_transient() {
                    return Ok(None);
                }
                self.card_uncertain(key, out_track_id);
                self.telemetry.sending(Err(error))
            }
        }
    }

    /// The robot that received the source message (the app's own by default).
    fn robot<'t>(&'t self, to: &'t SendTarget<'_>) -> &'t str {
        to.metadata
            .get("robot_code")
            .and_then(Value::as_str)
            .filter(|code| !code.is_empty())
            .unwrap_or(&self.settings.client_id)
    }

    /// Sends `message` to the chat of `to`.
    async fn send(&self, to: &SendTarget<'_>, message: &RobotMessage<'_>) -> ChannelResult<String> {
        let recipient = recipient(to);
        let sent = self.api.send(self.robot(to), recipient, message).await;
        self.telemetry.sending(sent.map_err(ChannelError::from))
    }

    /// The file a handle (`inbound::parse_handle`) names, at most `max_bytes` of it.
    async fn download(&self, handle: &str, max_bytes: u64) -> ChannelResult<Bytes> {
        let Some((robot, code)) = parse_handle(handle) else {
            return Err(ChannelError::Rejected {
                reason: "not a DingTalk file handle".into(),
            });
        };
        Ok(self.api.download_file(robot, code, max_bytes).await?)
    }

    async fn send_markdown(&self, to: &SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        let title = title(text);
        let key = self
            .send(
                to,
                &RobotMessage::Markdown {
                    title: &title,
                    text,
                },
            )
            .await?;
        Ok(SentMessage {
            id: MessageId::new(key),
        })
    }
}

/// Where a reply to `to` goes: the group, or the user of a one-to-one chat (whose chat id
/// is their staff id).
fn recipient<'t>(to: &'t SendTarget<'_>) -> Recipient<'t> {
    match to.chat_kind {
        ChatKind::Group => Recipient::Group {
            open_conversation_id: to.chat_id.as_str(),
        },
        ChatKind::Private => Recipient::User {
            staff_id: to.chat_id.as_str(),
        },
    }
}

/// Which answer a card is: its chat and the message it answers.
fn card_key(to: &SendTarget<'_>) -> String {
    let source = to.reply_to.map_or("", |id| id.as_str());
    format!("{}/{source}", to.chat_id.as_str())
}

/// A markdown message's title: its first line with text once markup is taken out, cut
/// short. DingTalk refuses an empty title, so a message of markup alone (a line of only
/// `**` and backticks) is titled by its next line, or `DingTalk`.
fn title(text: &str) -> String {
    let line = text
        .lines()
        .map(|l| {
            l.trim_start_matches(['>', '#', '*', ' ', '-'])
                .chars()
                .filter(|c| !matches!(c, '*' | '`'))
                .collect::<String>()
        })
        .find(|l| !l.trim().is_empty());
    let Some(line) = line else {
        return "DingTalk".to_owned();
    };
    let line = line.trim();
    let mut title: String = line.chars().take(TITLE_CHARS).collect();
    if line.chars().count() > TITLE_CHARS {
        title.push('…');
    }
    title
}

#[async_trait]
impl Channel for DingTalkChannel {
    fn identity(&self) -> &ChannelIdentity {
        &self.identity
    }

    async fn run(
        &self,
        sink: InboundSink,
        shutdown: CancellationToken,
    ) -> ChannelResult<ChannelExit> {
        let settings = StreamSettings {
            api_url: self.settings.api_url.clone(),
            client_id: self.settings.client_id.clone(),
            client_secret: self.settings.client_secret.clone(),
            timers: Timers::default(),
        };
        let mut admit = Admit {
            channel: self,
            sink: &sink,
        };
        self.telemetry.set_connected(true);
        let reconnect = self.telemetry.reconnect(ws::RECONNECT_BACKOFF);
        let result = ws::run(&settings, &self.http, &mut admit, reconnect, &shutdown).await;
        transport_ended(&self.telemetry, result)
    }

    /// A markdown message; a final whose stream could not be started goes into the card
    /// that start may have created all the same.
    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        if to.hints.send_key.is_some()
            && let Some(id) = self.write_uncertain_card(&to, text, true).await?
        {
            return Ok(SentMessage { id });
        }
        self.send_markdown(&to, text).await
    }

    /// Creates and delivers the AI card with the first text (card mode only).
    async fn start_stream(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        let Some(template_id) = self.settings.card_template_id.as_deref() else {
            return Err(ChannelError::Unsupported(
                "streaming without a card template",
            ));
        };
        if let Some(id) = self.write_uncertain_card(&to, text, false).await? {
            return Ok(SentMessage { id });
        }
        let out_track_id = api::new_out_track_id();
        let card = NewCard {
            template_id,
            out_track_id: &out_track_id,
            robot_code: self.robot(&to),
            to: recipient(&to),
            content: text,
        };
        let created = self
            .api
            .create_and_deliver_card(&card)
            .await
            .map_err(ChannelError::from);
        if let Err(error) = &created
            && error.is_transient()
            && error.retry_after().is_none()
        {
            self.card_uncertain(card_key(&to), out_track_id.clone());
        }
        self.telemetry.sending(created)?;
        Ok(SentMessage {
            id: MessageId::new(out_track_id),
        })
    }

    async fn edit_text(&self, _: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        let streamed = self.api.stream_card(id.as_str(), text, false).await;
        self.telemetry.sending(streamed.map_err(ChannelError::from))
    }

    async fn finish_stream(&self, _: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        let streamed = self.api.stream_card(id.as_str(), text, true).await;
        self.telemetry.sending(streamed.map_err(ChannelError::from))
    }

    /// Uploads the file and sends it as an image or a file message.
    async fn send_file(&self, to: SendTarget<'_>, file: &OutboundFile) -> ChannelResult {
        let bytes =
            Bytes::from(im_bridge_channel::read_staged(&file.path, MAX_UPLOAD_BYTES).await?);
        let kind = if file.is_image_of(IMAGE_TYPES) {
            MediaType::Image
        } else {
            MediaType::File
        };
        let uploaded = self.api.upload_media(kind, &file.filename, bytes).await;
        let media_id = self
            .telemetry
            .sending(uploaded.map_err(ChannelError::from))?;
        let extension = file_type(&file.filename);
        let message = match kind {
            MediaType::Image => RobotMessage::Image {
                photo_url: &media_id,
            },
            MediaType::File => RobotMessage::File {
                media_id: &media_id,
                file_name: &file.filename,
                file_type: &extension,
            },
        };
        self.send(&to, &message).await.map(drop)
    }

    /// Downloads a picture or file a user sent (`messageFiles/download`, bounded).
    async fn fetch_file(&self, file: &InboundFile, max_bytes: u64) -> ChannelResult<Bytes> {
        let download = |handle| self.download(handle, max_bytes);
        fetch_handle(&self.telemetry, file, max_bytes, download).await
    }
}

/// Admits each robot message; what it answers is the frame's ack.
struct Admit<'a> {
    channel: &'a DingTalkChannel,
    sink: &'a InboundSink,
}

impl EventHandler for Admit<'_> {
    fn handle(&mut self, data: &str) -> Verdict {
        let channel = self.channel;
        channel.telemetry.received(1);
        let ctx = InboundContext {
            allowed_users: &channel.allowed_users,
            commands: &channel.commands,
            robot_code: &channel.settings.client_id,
        };
        let msg = match normalize_data(data, &ctx) {
            Ok(msg) => msg,
            Err(Skip::Malformed) => {
                channel.telemetry.error(Stage::Processing);
                tracing::warn!(
                    channel = NAME,
                    "Skipped a DingTalk robot message that could not be read."
                );
                return Verdict::Malformed;
            }
            Err(skip) => {
                skip.log(NAME);
                return Verdict::Accepted;
            }
        };
        match self.sink.offer(msg) {
            // Refused as too busy, the sender is told so: nothing to redeliver either.
            Ok(()) | Err(AdmitError::QueueFull) => Verdict::Accepted,
            Err(error) => {
                tracing::warn!(channel = NAME, %error, "A DingTalk message was not admitted; DingTalk will deliver it again.");
                Verdict::Retry
            }
        }
    }

    fn dropped(&mut self, _: Dropped) {
        self.channel.telemetry.error(Stage::Receiving);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_the_first_line_without_markup() {
        assert_eq!(title("**Plan**\n\nship it"), "Plan");
        assert_eq!(title("> **rust**\n> fn main"), "rust");
        assert_eq!(title("\n\n"), "DingTalk");
        // Inline code holding a backtick, as the renderer writes it, is all markup.
        assert_eq!(title("**`**\nthe rest"), "the rest");
        assert_eq!(title("`` ` ``"), "DingTalk");
        let long = "x".repeat(40);
        assert_eq!(title(&long), format!("{}…", "x".repeat(24)));
    }
}
