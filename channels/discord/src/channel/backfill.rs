//! Messages a lost session never delivered, read back over REST.
//!
//! serenity 0.12.5 restarts its shard when a heartbeat goes unACKed (a zombied
//! connection: a NAT timeout, a paused VM, a silent TCP drop): it IDENTIFYs afresh
//! instead of resuming, so Discord never replays what the old session missed, and a
//! message sent in that gap would go unanswered without a trace. Op 9 `false` and a
//! session Discord refused to resume end the same way. So when a READY starts a new
//! session after an earlier one (a RESUMED replays by itself and needs none of this), the
//! channel reads the history of the channels (and DMs) active lately, after the last
//! message it saw in each, and feeds every user's message through the normal intake, in
//! id order; the intake's dedupe by message id keeps a message the gateway delivered too
//! from running twice.
//!
//! Bounded: [`RECENT_CHANNELS`] channels (the least recently active forgotten first),
//! [`MAX_PAGES`] pages of [`PAGE`] messages each, [`BUDGET`] in all; what is left past a
//! bound is logged as a count, never read. A channel with no message seen since the
//! daemon started is not read (the bridge has no mark to read after).

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use im_bridge_channel::InboundSink;
use serenity::model::id::GuildId;

use super::DiscordChannel;
use crate::NAME;
use crate::error::ApiError;
use crate::model::Message;
use crate::transport::ws;

/// Channels remembered with their last message; at the bound the least recently active
/// one is forgotten (and not read back after a lost session).
pub(super) const RECENT_CHANNELS: usize = 256;
/// Messages asked for per page: Discord's most.
const PAGE: u8 = 100;
/// Pages read per channel; a channel with more is left there (counted as cut).
const MAX_PAGES: usize = 5;
/// The whole read-back's time; the channels not read by then are left (counted as cut).
const BUDGET: Duration = Duration::from_secs(60);
/// The longest rate-limit wait taken inside a read-back; a longer one cuts the channel.
const MAX_WAIT: Duration = Duration::from_secs(5);

/// Where the bridge stopped reading a channel: its guild (`None` for a DM; REST messages
/// carry none) and the newest message id seen in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Mark {
    guild: Option<GuildId>,
    last: u64,
}

/// The channels active lately, most recent last; at most [`RECENT_CHANNELS`].
#[derive(Default)]
pub(super) struct Recent {
    marks: HashMap<u64, Mark>,
    order: VecDeque<u64>,
}

impl Recent {
    /// Notes `message` as seen in its channel.
    pub(super) fn saw(&mut self, message: &Message) {
        let channel = message.channel_id.get();
        let id = message.id.get();
        let mark = self.marks.entry(channel).or_insert(Mark {
            guild: message.guild_id,
            last: id,
        });
        mark.last = mark.last.max(id);
        self.order.retain(|c| *c != channel);
        self.order.push_back(channel);
        while self.order.len() > RECENT_CHANNELS {
            if let Some(old) = self.order.pop_front() {
                self.marks.remove(&old);
            }
        }
    }

    /// The channels and their marks, the most recently active first.
    pub(super) fn marks(&self) -> Vec<(u64, Mark)> {
        let mark = |c: &u64| Some((*c, *self.marks.get(c)?));
        self.order.iter().rev().filter_map(mark).collect()
    }
}

/// What a read-back found, for its log line.
#[derive(Debug, Default)]
struct Tally {
    channels: usize,
    messages: usize,
    recovered: usize,
    failed: usize,
    cut: usize,
}

/// Reads back the channels of `marks` after their marks and feeds users' messages to the
/// intake; logs what it found (counts only).
pub(super) async fn read_back(
    channel: &DiscordChannel,
    sink: &InboundSink,
    marks: Vec<(u64, Mark)>,
) {
    let total = marks.len();
    let mut tally = Tally::default();
    let all = async {
        for (id, mark) in marks {
            read_channel(channel, sink, id, mark, &mut tally).await;
            tally.channels += 1;
        }
    };
    if tokio::time::timeout(BUDGET, all).await.is_err() {
        tally.cut += total - tally.channels;
    }
    let Tally {
        channels,
        messages,
        recovered,
        failed,
        cut,
    } = tally;
    if recovered > 0 || failed > 0 || cut > 0 {
        tracing::warn!(
            channel = NAME,
            channels,
            messages,
            recovered,
            failed,
            cut,
            "Read back Discord messages a lost gateway session missed."
        );
    } else {
        tracing::info!(
            channel = NAME,
            channels,
            messages,
            "Read back Discord channels after a new gateway session; nothing was missed."
        );
    }
}

/// One channel's messages after `mark`, page by page.
async fn read_channel(
    channel: &DiscordChannel,
    sink: &InboundSink,
    id: u64,
    mark: Mark,
    tally: &mut Tally,
) {
    let mut after = mark.last;
    for _ in 0..MAX_PAGES {
        let page = match channel.api.messages_after(id, after, PAGE).await {
            Ok(page) => page,
            Err(ApiError::RateLimited { retry_after, .. }) if retry_after <= MAX_WAIT => {
                tokio::time::sleep(retry_after).await;
                continue;
            }
            Err(error) => {
                tracing::debug!(channel = NAME, %error, "Reading a Discord channel's history failed.");
                tally.failed += 1;
                return;
            }
        };
        let full = page.len() >= usize::from(PAGE);
        for mut message in page {
            after = after.max(message.id.get());
            message.guild_id = mark.guild;
            let bot = super::lock(&channel.state).bot_id.unwrap_or(0);
            if !ws::by_a_user(&message, bot) {
                continue;
            }
            tally.messages += 1;
            if channel.intake(sink, &message).await {
                tally.recovered += 1;
            }
        }
        if !full {
            return;
        }
    }
    tally.cut += 1;
}
