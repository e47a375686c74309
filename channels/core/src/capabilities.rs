//! What a channel can show, declared once by each adapter.
//!
//! The manager never names a platform: it asks these capabilities whether partial updates
//! are worth streaming, and the delivery engine reads them to throttle, split and route.

use std::time::Duration;

use serde::Serialize;

use crate::message::ChatKind;
use crate::render::{Dialect, Plain};

/// How a channel can show a reply that is still being written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UpdateMode {
    /// Send one message, then edit it in place (Telegram, Discord, the console on a TTY).
    EditInPlace,
    /// Patch a card in place (Feishu, DingTalk AI cards).
    Card,
    /// The platform streams natively.
    NativeStream,
    /// Only finals can be shown; partial updates are dropped (QQ, the console on a pipe).
    FinalOnly,
}

/// The unit a platform's message length limit is counted in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LengthUnit {
    /// UTF-16 code units (Telegram).
    Utf16,
    /// UTF-8 bytes (QQ).
    Bytes,
    /// Unicode scalar values.
    Chars,
}

impl LengthUnit {
    /// The length of `text` in this unit.
    pub fn measure(self, text: &str) -> usize {
        match self {
            LengthUnit::Utf16 => text.encode_utf16().count(),
            LengthUnit::Bytes => text.len(),
            LengthUnit::Chars => text.chars().count(),
        }
    }
}

/// Passive-reply rules of platforms that only let a bot answer a recent message (QQ).
///
/// An answer whose run would outlive its source's window is handed off before the window
/// closes: what is written so far goes out as a reply while it still can, with a line
/// saying the rest follows, and the rest reaches the chat the way [`ReplyWindow::late`]
/// says (the daemon's manager does this; `docs/platforms/qq.md` tells the story).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ReplyWindow {
    /// How long after a group message a reply is accepted.
    pub group: Duration,
    /// How long after a private message a reply is accepted.
    pub private: Duration,
    /// How many replies one source message allows.
    pub max_replies_per_source: u32,
    /// How the rest of an answer reaches the chat once its source takes no more replies.
    pub late: LateReplies,
    /// A message made again under a send key that already took a reply is shown once and
    /// counted once by the platform (QQ, by the `msg_seq` the key gives): the engine then
    /// takes no reply for such a repeat, and a final delivered again counts the replies its
    /// own messages took as left for it, so it is split as before. `false` (WeChat, which
    /// reads no key): every write takes one.
    pub repeats_shown_once: bool,
}

impl ReplyWindow {
    /// How long after a message of `kind` a reply to it is accepted.
    pub const fn length(&self, kind: ChatKind) -> Duration {
        match kind {
            ChatKind::Group => self.group,
            ChatKind::Private => self.private,
        }
    }
}

/// How a platform lets an answer through once its source message takes no more replies
/// (its window closed, or its replies are spent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LateReplies {
    /// Only as a reply to a newer message: the rest waits, journaled, for the chat's next
    /// message (in a group, anyone's) and is sent as the first reply to it, before that
    /// message's own answer. QQ since 2025-04-21, when proactive messages ended.
    NextMessage,
    /// As a message that answers no source ([`SendTarget::reply_to`] `None`, an "active"
    /// message); when the platform refuses one, the rest waits for the next message as
    /// with [`LateReplies::NextMessage`].
    ///
    /// [`SendTarget::reply_to`]: crate::SendTarget::reply_to
    Unsourced,
}

/// How many writes a platform lets a bot make in one chat: a short burst, then one per
/// interval, by chat kind (Telegram: 3, then about 1/s in private chats and 20/min in
/// groups, every new message, edit and upload counted; WeCom: 30 new messages a minute per
/// conversation, a stream counted once however often it is refreshed). The delivery engine
/// keeps within it, so a final goes out as soon as the budget allows instead of after a
/// fixed gap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ChatBudget {
    /// The calls that draw on it (the typing hint never does).
    pub writes: Writes,
    /// Writes allowed back to back in a chat that has been quiet.
    pub burst: u32,
    /// The sustained spacing of writes in a private chat.
    pub private: Duration,
    /// The sustained spacing of writes in a group chat.
    pub group: Duration,
    /// How long a reply's first partial text is held back before it is shown. A reply
    /// whose final comes meanwhile is sent as one message: one write instead of two (the
    /// typing hint shows meanwhile). Later partials and finals are never held.
    pub first_partial_hold: Duration,
}

impl ChatBudget {
    /// `burst` writes back to back in a quiet chat, then one every `spacing`, in private
    /// and group chats alike; no first partial held back.
    pub const fn new(writes: Writes, burst: u32, spacing: Duration) -> Self {
        Self {
            writes,
            burst,
            private: spacing,
            group: spacing,
            first_partial_hold: Duration::ZERO,
        }
    }

    /// The same budget, its writes in group chats one every `spacing`.
    pub const fn in_groups(self, spacing: Duration) -> Self {
        Self {
            group: spacing,
            ..self
        }
    }

    /// The same budget, a reply's first partial text held back for `hold`.
    pub const fn holding_first_partial(self, hold: Duration) -> Self {
        Self {
            first_partial_hold: hold,
            ..self
        }
    }
}

/// Which writes draw on a [`RateBudget`], by the [`Channel`](crate::Channel) call that makes
/// them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Writes {
    /// New messages: `send_text`, `start_stream`.
    pub messages: bool,
    /// Changes to a message already shown: `edit_text`, `finish_stream` (card updates).
    pub edits: bool,
    /// Uploads: `send_file`.
    pub files: bool,
    /// The typing hint: `show_typing`.
    pub typing: bool,
}

impl Writes {
    /// Every message, edit and upload; not the typing hint.
    pub const MESSAGES_EDITS_FILES: Self = Self {
        messages: true,
        edits: true,
        files: true,
        typing: false,
    };
    /// Every call that writes, the typing hint included.
    pub const ALL: Self = Self {
        typing: true,
        ..Self::MESSAGES_EDITS_FILES
    };
    /// New messages and uploads only.
    pub const MESSAGES_FILES: Self = Self {
        edits: false,
        ..Self::MESSAGES_EDITS_FILES
    };
    /// Edits only (a family of update calls with a limit of its own).
    pub const EDITS: Self = Self {
        messages: false,
        edits: true,
        files: false,
        typing: false,
    };
}

/// A limit the platform sets on the bot (or app) as a whole, across all its chats, for one
/// family of calls: `burst` writes back to back from a quiet start, then one per `every`
/// (a token bucket). Telegram's ~30 messages/s per bot, Discord's 50 requests/s, an app's
/// per-API QPS on Feishu or DingTalk.
///
/// The delivery engine keeps every write of [`RateBudget::writes`] within it: a final waits
/// for its token, a partial update or the typing hint is skipped while the budget is short
/// (the next update, or the final, shows the text). With a store shared by several
/// replicas the tokens come from the store, so the replicas together stay within it.
/// Declare a little under the platform's figure: tokens are counted when a call is sent,
/// the platform counts it when it arrives, and the adapter's own calls (reactions, reads)
/// are not counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RateBudget {
    /// The budget's name: a metric label, the key under `channels.<name>.rate_budgets`
    /// that overrides it, and part of its key in a shared store. Lowercase, e.g. `bot`.
    pub name: &'static str,
    /// The calls that draw on it.
    pub writes: Writes,
    /// Writes allowed back to back when the budget is whole (at least 1).
    pub burst: u32,
    /// The sustained spacing: one more write per interval.
    pub every: Duration,
}

impl RateBudget {
    /// `burst` at once, then `per_second` writes a second (0 counts as 1).
    pub const fn per_second(
        name: &'static str,
        writes: Writes,
        burst: u32,
        per_second: u32,
    ) -> Self {
        Self::per_period(name, writes, burst, 1_000_000_000, per_second)
    }

    /// `burst` at once, then `per_minute` writes a minute (0 counts as 1).
    pub const fn per_minute(
        name: &'static str,
        writes: Writes,
        burst: u32,
        per_minute: u32,
    ) -> Self {
        Self::per_period(name, writes, burst, 60_000_000_000, per_minute)
    }

    /// `burst` at once, then `n` writes per `period_ns` nanoseconds.
    const fn per_period(
        name: &'static str,
        writes: Writes,
        burst: u32,
        period_ns: u64,
        n: u32,
    ) -> Self {
        let n = if n == 0 { 1 } else { n as u64 };
        Self {
            name,
            writes,
            burst,
            every: Duration::from_nanos(period_ns / n),
        }
    }
}

/// Everything the manager and the delivery engine may know about a channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Capabilities {
    /// How partial updates can be shown.
    pub updates: UpdateMode,
    /// The unit of [`Capabilities::max_message_len`].
    pub length_unit: LengthUnit,
    /// Longest message the platform accepts, in `length_unit`s.
    pub max_message_len: usize,
    /// Minimum time between two edits of one message in a private chat (intermediate
    /// updates; a final is paced only by [`Capabilities::chat_budget`]).
    pub min_edit_interval_private: Duration,
    /// Minimum time between two edits of one message in a group chat.
    pub min_edit_interval_group: Duration,
    /// Writes per chat the platform allows; `None` = no per-chat limit.
    pub chat_budget: Option<ChatBudget>,
    /// Limits on the bot (or app) as a whole, across chats, each for a family of calls
    /// (see [`RateBudget`]); empty = none.
    pub rate_budgets: &'static [RateBudget],
    /// Passive-reply rules, for platforms that have them.
    pub reply_window: Option<ReplyWindow>,
    /// Every message of one conversation is handled one after another, in arrival order,
    /// commands that start no run (`/status`, `/help`, …) too, which then answer only once
    /// the turn before them ended (`/stop` aside). Chat messages and the commands that
    /// start a run keep their order on every channel anyway; this is for a channel whose
    /// reader expects every reply in the order asked (the console, whose scripted input
    /// reads them so). Off, those commands answer at once, beside a running turn.
    pub serialize_conversations: bool,
    /// Answer every admitted message at once with a localized "working on it" reply that
    /// later updates and the final replace (Telegram's placeholder). On a channel that
    /// shows finals only, the notice is a message of its own (DingTalk).
    pub working_placeholder: bool,
    /// How often the typing hint must be sent again to stay visible while an answer is
    /// being written, until the first reply shows (Discord's fades after about 10 s).
    /// `None`: shown once, with the placeholder, where there is one.
    pub typing_refresh: Option<Duration>,
    /// How long after a message arrives the handles of its files stop working (WeCom's
    /// media URLs expire after five minutes). The manager then reads a chat message's files
    /// as soon as it admits the message and keeps them on disk until its turn, so a message
    /// that waits behind a long run, or is recovered after a restart, still has them.
    /// `None`: handles keep working; files are read when the turn starts.
    pub files_expire_after: Option<Duration>,
    /// The markup the channel's texts are in, as the adapter describes it: the delivery
    /// engine renders the agent's Markdown into it ([`Plain`](crate::render::Plain): the
    /// text as written). Compared and shown by its [`Dialect::name`].
    pub markup: &'static dyn Dialect,
    /// The largest file [`Channel::send_file`](crate::Channel::send_file) can deliver, in
    /// bytes; 0 = the channel sends no files (the files an agent presents are then only
    /// named in the reply).
    pub max_upload_bytes: u64,
    /// Tell the channel when the bridge is done with each message:
    /// [`Channel::turn_ended`](crate::Channel::turn_ended) after its last reply (and a
    /// goal's follow-ups) was delivered. The console asks while it reads a script, one line
    /// at a time.
    pub turn_ends: bool,
    /// The channel can put a reaction on a user's message
    /// ([`Channel::react`](crate::Channel::react)). The manager then shows a busy or queued
    /// notice only once per conversation and run, and marks later messages with a reaction
    /// instead. Without reactions, a later message that waits its turn gets nothing visible
    /// (it is still handled) and each one turned away gets the busy reply.
    pub reactions: bool,
    /// A streamed message shows that it is still being written until
    /// [`Channel::finish_stream`](crate::Channel::finish_stream) closes it (a DingTalk AI
    /// card, a WeCom stream). One that a reply leaves behind to go on below it
    /// ([`DeliveryHints::stays_last`](crate::DeliveryHints::stays_last)) is then finished
    /// as it reads. Where false (a message edited in place) such a message is left as it
    /// is: finishing it could only repeat its text, and some channels mark the user's
    /// message answered on a finish.
    pub finish_closes_stream: bool,
}

impl Capabilities {
    /// A channel that can only show finals, with the given length limit in characters.
    pub const fn final_only(max_message_len: usize) -> Self {
        Self {
            updates: UpdateMode::FinalOnly,
            length_unit: LengthUnit::Chars,
            max_message_len,
            min_edit_interval_private: Duration::ZERO,
            min_edit_interval_group: Duration::ZERO,
            chat_budget: None,
            rate_budgets: &[],
            reply_window: None,
            serialize_conversations: false,
            working_placeholder: false,
            typing_refresh: None,
            files_expire_after: None,
            markup: &Plain,
            max_upload_bytes: 0,
            turn_ends: false,
            reactions: false,
            finish_closes_stream: false,
        }
    }

    /// Whether non-final updates can be shown at all; if not, the manager waits for the
    /// whole answer instead of streaming it.
    pub const fn shows_partial_updates(&self) -> bool {
        !matches!(self.updates, UpdateMode::FinalOnly)
    }
}
