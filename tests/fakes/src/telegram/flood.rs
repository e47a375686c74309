//! Telegram's flood limits, played by the fake so tests can prove a bot's pacing holds
//! (issue 13): an opt-in token-bucket limiter in front of the writes.
//!
//! Telegram's FAQ gives about 1 message/s per chat, 20 messages/min per group and about 30
//! messages/s per bot overall, and it tolerates a short burst. The fake keeps one bucket per
//! chat (private when the id is positive, a group otherwise) and one for the bot: a write
//! goes through only when every bucket it draws on has a token, and then takes one from each.
//! A bucket alone would let its burst *and* a span's refill through in its first span (3 +
//! 20 writes in a group's first minute), more than the FAQ's figures, so the fake also holds
//! them as sliding [`Window`]s: at most 20 writes in any 60 s in one group and 30 in any
//! second for the bot, whatever the buckets say. Over budget it answers 429 with
//! `retry_after` = the whole seconds until a token is back, or the oldest write leaves its
//! window (at least 1), exactly as the scripted [`Failure::RetryAfter`](super::Failure)
//! does; the refused call is recorded and changes nothing.
//!
//! What counts: the writes that create or change a message (`sendMessage`,
//! `editMessageText`, `sendPhoto`, `sendDocument`) and only when they succeed, so a 400
//! ("message is not modified", a bad chat) takes no token. `sendChatAction` and reads never
//! count. A scripted failure fires before the limiter and takes no token either.
//!
//! Limits are off until [`FakeTelegram::enforce_flood_limits`]: existing tests script their
//! timings exactly. The benchmarks and the replicas' test (issue 33) switch them on, the
//! bot-wide one included. Time is [`tokio::time::Instant`], so paused-time tests drive the
//! refill.
//!
//! Each bucket is kept as the instant it will be full again (the "theoretical arrival time"
//! of GCRA): a write at `now` is admitted when `max(full_at, now) + every - now` stays within
//! `burst × every`, which is a token bucket of `burst` tokens refilled one per `every`.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::{Answer, FakeTelegram, Telegram, methods};

/// The methods that draw on the budget: writes that create or change a message.
const WRITES: &[&str] = &[
    "sendMessage",
    "editMessageText",
    "sendPhoto",
    "sendDocument",
];

/// Most chat buckets kept. At the bound, buckets already full again (idle chats) are
/// dropped, which changes no answer: a missing bucket is a full one.
const MAX_CHATS: usize = 4096;

/// One token bucket: `burst` writes at once, then one more each `every`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    /// Writes allowed back to back from a full bucket (0 is taken as 1).
    pub burst: u32,
    /// Time to earn back one write; zero = unlimited.
    pub every: Duration,
}

impl Rate {
    /// `burst` at once, then `n` writes per second sustained.
    pub fn per_second(burst: u32, n: u32) -> Self {
        Self {
            burst,
            every: Duration::from_secs(1) / n.max(1),
        }
    }

    /// `burst` at once, then `n` writes per minute sustained.
    pub fn per_minute(burst: u32, n: u32) -> Self {
        Self {
            burst,
            every: Duration::from_secs(60) / n.max(1),
        }
    }

    /// How long a write at `now` must wait, given the bucket is full again at `full_at`
    /// (`None` = full); zero = it may go now.
    fn wait(&self, full_at: Option<Instant>, now: Instant) -> Duration {
        let after = self.after_write(full_at, now);
        let window = self.every.saturating_mul(self.burst.max(1));
        after.saturating_duration_since(now).saturating_sub(window)
    }

    /// When the bucket is full again after a write at `now`.
    fn after_write(&self, full_at: Option<Instant>, now: Instant) -> Instant {
        full_at.map_or(now, |f| f.max(now)) + self.every
    }
}

/// At most `limit` writes in any `span` (a sliding window): how Telegram states its
/// figures ("no more than 20 messages per minute" in a group), which no burst may exceed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Writes allowed within one span (0 is taken as 1).
    pub limit: u32,
    /// The span: a write counts until this long after it.
    pub span: Duration,
}

impl Window {
    /// How long a write at `now` must wait, given the writes admitted so far (`recent`,
    /// oldest first); zero = it may go. Forgets the writes that left the window, which
    /// changes no answer.
    fn wait(&self, recent: &mut VecDeque<Instant>, now: Instant) -> Duration {
        while recent.front().is_some_and(|at| *at + self.span <= now) {
            recent.pop_front();
        }
        let limit = self.limit.max(1) as usize;
        match recent.len().checked_sub(limit) {
            // The write that has to leave for one more to fit.
            Some(index) => (recent[index] + self.span).saturating_duration_since(now),
            None => Duration::ZERO,
        }
    }

    /// Counts a write at `now`; keeps at most `limit` writes, all an answer needs.
    fn admit(&self, recent: &mut VecDeque<Instant>, now: Instant) {
        recent.push_back(now);
        while recent.len() > self.limit.max(1) as usize {
            recent.pop_front();
        }
    }
}

/// The limits the fake enforces once switched on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FloodLimits {
    /// Each private chat (positive chat id).
    pub private: Rate,
    /// Each group, supergroup or channel (negative chat id).
    pub group: Rate,
    /// The bot across all chats.
    pub global: Rate,
    /// Each group's writes in any span, on top of its bucket.
    pub group_window: Window,
    /// The bot's writes in any span, on top of its bucket.
    pub global_window: Window,
}

impl FloodLimits {
    /// Telegram's published limits: a burst of 3, then 1 write/s per private chat and 20
    /// writes/min per group, never more than 20 in any minute; 30 writes/s per bot across
    /// chats, never more than 30 in any second.
    pub fn telegram() -> Self {
        Self {
            private: Rate::per_second(3, 1),
            group: Rate::per_minute(3, 20),
            global: Rate::per_second(30, 30),
            group_window: Window {
                limit: 20,
                span: Duration::from_secs(60),
            },
            global_window: Window {
                limit: 30,
                span: Duration::from_secs(1),
            },
        }
    }

    fn for_chat(&self, chat_id: i64) -> Rate {
        if chat_id > 0 {
            self.private
        } else {
            self.group
        }
    }
}

impl Default for FloodLimits {
    fn default() -> Self {
        Self::telegram()
    }
}

/// The limiter's state: off (no limits) until a test switches it on.
#[derive(Default)]
pub(crate) struct Flood {
    limits: Option<FloodLimits>,
    /// When each chat's bucket is full again; bounded by [`MAX_CHATS`].
    chats: HashMap<i64, Instant>,
    /// Each group's writes within its window, oldest first (at most the window's limit
    /// each); bounded by [`MAX_CHATS`].
    groups: HashMap<i64, VecDeque<Instant>>,
    /// When the bot's bucket is full again (`None` = full).
    global: Option<Instant>,
    /// The bot's writes within its window, oldest first (at most the window's limit).
    recent: VecDeque<Instant>,
    /// 429s answered by the limiter.
    refusals: u64,
}

impl Flood {
    /// Whether a write to `chat` at `now` is over budget: `Some(wait)` (and one more
    /// refusal counted) when it is, `None` when it may go or limits are off.
    fn refuse(&mut self, chat: Option<i64>, now: Instant) -> Option<Duration> {
        let limits = self.limits?;
        let global = limits.global.wait(self.global, now);
        let global_window = limits.global_window.wait(&mut self.recent, now);
        let chat_bucket = chat.map_or(Duration::ZERO, |c| {
            limits.for_chat(c).wait(self.chats.get(&c).copied(), now)
        });
        let group_window = chat
            .and_then(|c| self.groups.get_mut(&c))
            .map_or(Duration::ZERO, |recent| {
                limits.group_window.wait(recent, now)
            });
        let wait = [global, global_window, chat_bucket, group_window]
            .into_iter()
            .fold(Duration::ZERO, Duration::max);
        if wait.is_zero() {
            return None;
        }
        self.refusals += 1;
        Some(wait)
    }

    /// Takes a token from every bucket a write to `chat` at `now` draws on, and counts it
    /// in every window.
    fn spend(&mut self, chat: Option<i64>, now: Instant) {
        let Some(limits) = self.limits else {
            return;
        };
        self.global = Some(limits.global.after_write(self.global, now));
        limits.global_window.admit(&mut self.recent, now);
        let Some(chat) = chat else {
            return;
        };
        if self.chats.len() >= MAX_CHATS {
            self.chats.retain(|_, full_at| *full_at > now);
        }
        let rate = limits.for_chat(chat);
        let full_at = rate.after_write(self.chats.get(&chat).copied(), now);
        self.chats.insert(chat, full_at);
        if chat > 0 {
            return;
        }
        let span = limits.group_window.span;
        if self.groups.len() >= MAX_CHATS {
            // A group whose newest write left its window holds nothing that counts.
            self.groups
                .retain(|_, recent| recent.back().is_some_and(|at| *at + span > now));
        }
        let recent = self.groups.entry(chat).or_default();
        limits.group_window.admit(recent, now);
    }
}

/// Whole seconds to wait, rounded up, at least 1: what `retry_after` says.
fn retry_after_secs(wait: Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}

/// Answers `method` with `run` unless the write is over budget (then 429). A successful
/// write takes its tokens; anything else takes none.
pub(super) fn guard(
    inner: &mut Telegram,
    method: &str,
    params: &Value,
    run: impl FnOnce(&mut Telegram) -> Answer,
) -> Answer {
    if inner.flood.limits.is_none() || !WRITES.contains(&method) {
        return run(inner);
    }
    let chat = methods::int(params, "chat_id");
    let now = Instant::now();
    if let Some(wait) = inner.flood.refuse(chat, now) {
        return Answer::retry_after(retry_after_secs(wait));
    }
    let answer = run(inner);
    if answer.status == 200 {
        inner.flood.spend(chat, now);
    }
    answer
}

impl FakeTelegram {
    /// Throttles writes from now on as Telegram does (see the `flood` module); every bucket
    /// starts full. Off by default.
    pub fn enforce_flood_limits(&self, limits: FloodLimits) {
        let mut inner = self.shared.lock();
        inner.flood.limits = Some(limits);
        inner.flood.chats.clear();
        inner.flood.groups.clear();
        inner.flood.global = None;
        inner.flood.recent.clear();
    }

    /// How many 429s the flood limiter has answered (scripted failures not included).
    pub fn flood_refusals(&self) -> u64 {
        self.shared.lock().flood.refusals
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telegram::TOKEN;
    use serde_json::json;
    use tokio::time::advance;

    fn flood(limits: FloodLimits) -> Flood {
        Flood {
            limits: Some(limits),
            ..Flood::default()
        }
    }

    /// One write to `chat` now, as `guard` does it: `Err(retry_after)` when refused.
    fn write(flood: &mut Flood, chat: i64) -> Result<(), u64> {
        let now = Instant::now();
        match flood.refuse(Some(chat), now) {
            Some(wait) => Err(retry_after_secs(wait)),
            None => {
                flood.spend(Some(chat), now);
                Ok(())
            }
        }
    }

    const PRIVATE: i64 = 42;
    const GROUP: i64 = -1_001_234;

    #[tokio::test(start_paused = true)]
    async fn a_private_chat_takes_a_burst_of_three_then_one_write_a_second() {
        let mut f = flood(FloodLimits::telegram());
        for _ in 0..3 {
            assert_eq!(write(&mut f, PRIVATE), Ok(()));
        }
        assert_eq!(write(&mut f, PRIVATE), Err(1));
        // A refused write takes nothing: the token is still due one second after the burst.
        advance(Duration::from_millis(999)).await;
        assert_eq!(write(&mut f, PRIVATE), Err(1), "1 ms left rounds up to 1 s");
        advance(Duration::from_millis(1)).await;
        assert_eq!(write(&mut f, PRIVATE), Ok(()));
        assert_eq!(write(&mut f, PRIVATE), Err(1));
        advance(Duration::from_secs(1)).await;
        assert_eq!(write(&mut f, PRIVATE), Ok(()));
        assert_eq!(f.refusals, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_bucket_refills_one_token_per_interval_up_to_the_burst() {
        let mut f = flood(FloodLimits::telegram());
        for _ in 0..3 {
            write(&mut f, PRIVATE).unwrap();
        }
        // Two seconds idle: two tokens back, not three.
        advance(Duration::from_secs(2)).await;
        assert_eq!(write(&mut f, PRIVATE), Ok(()));
        assert_eq!(write(&mut f, PRIVATE), Ok(()));
        assert_eq!(write(&mut f, PRIVATE), Err(1));
        // A long idle refills to the burst and no further.
        advance(Duration::from_secs(3600)).await;
        for _ in 0..3 {
            assert_eq!(write(&mut f, PRIVATE), Ok(()));
        }
        assert_eq!(write(&mut f, PRIVATE), Err(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_group_takes_a_burst_of_three_then_one_write_per_three_seconds() {
        let mut f = flood(FloodLimits::telegram());
        for _ in 0..3 {
            assert_eq!(write(&mut f, GROUP), Ok(()));
        }
        assert_eq!(write(&mut f, GROUP), Err(3), "one write per 3 s in a group");
        // A private chat at the same pace would have had one a second.
        advance(Duration::from_secs(1)).await;
        assert_eq!(write(&mut f, PRIVATE), Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_group_takes_no_more_than_twenty_writes_in_any_minute() {
        let mut f = flood(FloodLimits::telegram());
        for _ in 0..3 {
            write(&mut f, GROUP).unwrap();
        }
        // Trying every second: the bucket alone would let 20 more through by 60 s, 23 in
        // the group's first minute; the window stops the 21st until the burst leaves it.
        let mut landed = vec![0];
        for t in 1..=60 {
            advance(Duration::from_secs(1)).await;
            match write(&mut f, GROUP) {
                Ok(()) => landed.push(t),
                Err(secs) if t >= 54 => assert_eq!(secs, 60 - t, "at {t} s"),
                Err(_) => {}
            }
        }
        assert_eq!(landed.len(), 1 + 18, "{landed:?}");
        assert_eq!(landed[landed.len() - 2..], [51, 60], "{landed:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn chats_have_their_own_buckets() {
        let mut f = flood(FloodLimits::telegram());
        for _ in 0..3 {
            write(&mut f, PRIVATE).unwrap();
            write(&mut f, GROUP).unwrap();
        }
        assert!(write(&mut f, PRIVATE).is_err());
        assert!(write(&mut f, GROUP).is_err());
        assert_eq!(write(&mut f, PRIVATE + 1), Ok(()));
        assert_eq!(write(&mut f, GROUP - 1), Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn the_bot_wide_limits_cap_writes_across_chats() {
        let mut f = flood(FloodLimits::telegram());
        for chat in 1..=30 {
            assert_eq!(write(&mut f, chat), Ok(()), "chat {chat}");
        }
        // The 31st chat has its own tokens but the bot has none: 33 ms rounds up to 1 s.
        assert_eq!(write(&mut f, 31), Err(1));
        // A token is back, but 30 writes are still within the last second.
        advance(Duration::from_secs(1) / 30).await;
        assert_eq!(write(&mut f, 31), Err(1));
        advance(Duration::from_secs(1) - Duration::from_secs(1) / 30).await;
        assert_eq!(write(&mut f, 31), Ok(()));
        assert_eq!(write(&mut f, 32), Ok(()), "the bucket refilled meanwhile");

        // Configurable: 5 writes at once, then 1 per 2 s, whichever chat.
        let mut f = flood(FloodLimits {
            global: Rate::per_minute(5, 30),
            ..FloodLimits::telegram()
        });
        for chat in 1..=5 {
            write(&mut f, chat).unwrap();
        }
        assert_eq!(write(&mut f, 6), Err(2));
    }

    #[tokio::test(start_paused = true)]
    async fn the_bot_takes_no_more_than_thirty_writes_in_any_second() {
        let mut f = flood(FloodLimits::telegram());
        // 20 at once, then one every 33 ms: the bucket would let all 50 through within the
        // first second; the window only 30.
        let mut landed = 0;
        for chat in 1..=20 {
            landed += usize::from(write(&mut f, chat).is_ok());
        }
        for chat in 21..=50 {
            advance(Duration::from_millis(33)).await;
            landed += usize::from(write(&mut f, chat).is_ok());
        }
        assert_eq!(landed, 30);
    }

    #[tokio::test(start_paused = true)]
    async fn writes_without_a_numeric_chat_draw_only_on_the_bot_bucket() {
        let mut f = flood(FloodLimits {
            global: Rate::per_second(2, 1),
            ..FloodLimits::telegram()
        });
        let now = Instant::now();
        assert_eq!(f.refuse(None, now), None);
        f.spend(None, now);
        f.spend(None, now);
        assert_eq!(f.refuse(None, now), Some(Duration::from_secs(1)));
        assert!(f.chats.is_empty());
    }

    #[test]
    fn limits_off_refuse_nothing_and_keep_nothing() {
        let mut f = Flood::default();
        let now = Instant::now();
        for _ in 0..100 {
            assert_eq!(f.refuse(Some(PRIVATE), now), None);
            f.spend(Some(PRIVATE), now);
        }
        assert!(f.chats.is_empty() && f.global.is_none());
        assert_eq!(f.refusals, 0);
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up_and_at_least_one() {
        assert_eq!(retry_after_secs(Duration::from_nanos(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(3)), 3);
    }

    async fn send(
        client: &reqwest::Client,
        fake: &FakeTelegram,
        chat: i64,
        text: &str,
    ) -> (u16, Value) {
        let response = client
            .post(format!("{}/bot{TOKEN}/sendMessage", fake.api_url()))
            .json(&json!({"chat_id": chat, "text": text}))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }

    #[tokio::test]
    async fn over_http_the_fourth_quick_message_to_a_private_chat_gets_429_and_another_chat_200() {
        let fake = FakeTelegram::start().await.unwrap();
        let client = reqwest::Client::new();
        // Off by default.
        for _ in 0..5 {
            assert_eq!(send(&client, &fake, 7, "free").await.0, 200);
        }
        fake.enforce_flood_limits(FloodLimits::telegram());
        // A refused-by-validation write takes no token.
        assert_eq!(send(&client, &fake, PRIVATE, " ").await.0, 400);
        for i in 0..3 {
            assert_eq!(send(&client, &fake, PRIVATE, &format!("m{i}")).await.0, 200);
        }
        let (status, body) = send(&client, &fake, PRIVATE, "m3").await;
        assert_eq!(status, 429);
        assert_eq!(
            body,
            json!({"ok": false, "error_code": 429,
                "description": "Too Many Requests: retry after 1",
                "parameters": {"retry_after": 1}})
        );
        assert_eq!(send(&client, &fake, PRIVATE + 1, "other").await.0, 200);

        assert_eq!(fake.flood_refusals(), 1);
        let texts: Vec<_> = fake
            .bot_messages(PRIVATE)
            .into_iter()
            .map(|m| m.text)
            .collect();
        assert_eq!(
            texts,
            ["m0", "m1", "m2"],
            "the refused call changed nothing"
        );
        let refused = fake
            .calls_to("sendMessage")
            .into_iter()
            .find(|c| c.status == 429)
            .unwrap();
        assert_eq!(refused.text(), Some("m3"));
        assert_eq!(refused.result, None);
    }
}
