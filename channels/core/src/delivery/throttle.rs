//! `Throttle`: paces the calls of one channel the way platforms ask.
//!
//! Three rules, all kept in an [`EditClock`] that the stream coalescer also reads, so it
//! can schedule a flush for the moment the clock allows instead of waiting inside a call
//! with a text that may be stale by then:
//!
//! - **The chat's budget** ([`ChatBudget`], when the platform has one). Every write to a
//!   chat the budget counts ([`ChatBudget::writes`]: new messages, edits and finishes,
//!   uploads) takes a place in the chat's budget:
//!   `burst` writes back to back, then one per interval by [`ChatKind`] (a GCRA, so places
//!   are handed out in call order and never oversubscribed). A final goes out as soon as
//!   the budget allows: an instant answer after the placeholder costs no fixed wait. A
//!   write is counted when its answer came, not when it was sent, so the platform, which
//!   counts it somewhere in between, never sees two writes closer than the budget allows.
//! - **Minimum edit interval.** Intermediate edits of one message are at least
//!   `min_edit_interval_private` / `min_edit_interval_group` after its last write, so a
//!   streamed reply does not spend the whole budget on edits. A finish does not wait for it.
//! - **Retry-After pauses the chat.** A `RetryAfter(d)` answer to any call in a chat
//!   pauses every later call in that chat until `d` has passed; they wait, the failing call
//!   itself is reported as is (the layers above decide whether to retry it). A call that
//!   would wait longer than [`MAX_PAUSE_WAIT`] fails at once with the remaining
//!   `RetryAfter` instead of holding its caller.
//!
//! Reading an inbound attachment (`fetch_file`) writes nothing to a chat: it passes
//! through unpaced.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::capabilities::{Capabilities, ChatBudget};
use crate::channel::{Channel, SendTarget, SentMessage};
use crate::error::{ChannelError, ChannelResult, RetryAfterHint};
use crate::ids::{ChatId, MessageId};
use crate::message::{ChatKind, OutboundFile};

use super::forward_channel;

/// The longest a call waits for its chat's pause to end; a longer pause fails the call.
pub const MAX_PAUSE_WAIT: Duration = Duration::from_secs(60);
/// What a pause too long for the clock becomes (a year: longer than any process lives).
const FAR_FUTURE: Duration = Duration::from_secs(365 * 24 * 3600);

/// How many chats' pauses are remembered at once. Expired pauses are pruned on every
/// insert; at the bound the pause ending soonest is forgotten (that chat's next call may
/// meet another `RetryAfter`, which pauses it again).
const MAX_PAUSED_CHATS: usize = 1024;

/// How many messages' last write times are remembered at once. An entry is dropped when
/// its message is finished, and pruned once its interval has passed; at the bound the
/// oldest is forgotten (its next edit may come early, and at worst meet a `RetryAfter`).
const MAX_TRACKED_MESSAGES: usize = 1024;

/// How many chats' budgets are tracked at once. A chat whose budget is whole again carries
/// no information and is pruned first; at the bound the chat that became free earliest is
/// forgotten (its next writes may come a little early, and at worst meet a `RetryAfter`).
const MAX_BUDGET_CHATS: usize = 4096;

/// When each chat and each live message may next be written.
#[derive(Debug)]
pub struct EditClock {
    private: Duration,
    group: Duration,
    budget: Option<ChatBudget>,
    state: Mutex<ClockState>,
}

#[derive(Debug, Default)]
struct ClockState {
    /// Chat → end of its Retry-After pause (bounded by [`MAX_PAUSED_CHATS`]).
    paused: HashMap<ChatId, Instant>,
    /// (chat, message) → its last write (bounded by [`MAX_TRACKED_MESSAGES`]).
    written: HashMap<(ChatId, MessageId), Instant>,
    /// Chat → its budget's theoretical arrival time: when the budget would be whole again
    /// (bounded by [`MAX_BUDGET_CHATS`]).
    budget: HashMap<ChatId, Instant>,
}

/// Which rules a write is paced by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Write<'a> {
    /// A new message: the pause and the budget.
    New,
    /// An upload: the pause and the budget.
    Upload,
    /// An intermediate edit of `message`: also its minimum edit interval.
    Edit(&'a MessageId),
    /// The final text of a streamed message: the pause and the budget only.
    Finish,
}

impl EditClock {
    /// A clock for a channel with these capabilities.
    pub fn new(caps: &Capabilities) -> Self {
        Self {
            private: caps.min_edit_interval_private,
            group: caps.min_edit_interval_group,
            budget: caps.chat_budget,
            state: Mutex::new(ClockState::default()),
        }
    }

    /// How long a reply's first partial is held back ([`ChatBudget::first_partial_hold`]).
    pub fn first_partial_hold(&self) -> Duration {
        self.budget.map_or(Duration::ZERO, |b| b.first_partial_hold)
    }

    /// The budget's spacing and burst tolerance in a chat of this kind, if it counts
    /// `write`.
    fn spacing(&self, kind: ChatKind, write: Write<'_>) -> Option<(Duration, Duration)> {
        let budget = self.budget?;
        let counted = match write {
            Write::New => budget.writes.messages,
            Write::Upload => budget.writes.files,
            Write::Edit(_) | Write::Finish => budget.writes.edits,
        };
        if !counted {
            return None;
        }
        let every = match kind {
            ChatKind::Private => budget.private,
            ChatKind::Group => budget.group,
        };
        Some((every, every * budget.burst.saturating_sub(1)))
    }

    /// When the chat's budget allows its next write (possibly in the past).
    fn budget_at(
        state: &ClockState,
        chat: &ChatId,
        spacing: Option<(Duration, Duration)>,
    ) -> Option<Instant> {
        let (_, tolerance) = spacing?;
        let tat = *state.budget.get(chat)?;
        Some(tat.checked_sub(tolerance).unwrap_or(tat))
    }

    /// Takes the chat's next place in its budget for `write` (none when the budget does
    /// not count it), at `not_before` or later; returns when it is.
    fn reserve(
        &self,
        chat: &ChatId,
        kind: ChatKind,
        write: Write<'_>,
        not_before: Instant,
    ) -> ChannelResult<Instant> {
        let spacing = self.spacing(kind, write);
        let mut state = self.lock();
        let at = Self::budget_at(&state, chat, spacing).map_or(not_before, |b| b.max(not_before));
        let wait = at.saturating_duration_since(Instant::now());
        if wait > MAX_PAUSE_WAIT {
            return Err(ChannelError::RetryAfter(wait));
        }
        if let Some((every, _)) = spacing {
            let tat = state.budget.get(chat).copied().map_or(at, |t| t.max(at)) + every;
            let now = Instant::now();
            insert_bounded(
                &mut state.budget,
                chat.clone(),
                tat,
                MAX_BUDGET_CHATS,
                |t| t <= now,
            );
        }
        Ok(at)
    }

    /// Re-times the write to `chat` that just returned as if it had reached the platform
    /// only now. The platform counts a write when it arrives, somewhere between the call
    /// and its answer; counting it at the answer can only be later, so network jitter can
    /// never make two writes look closer to the platform than the budget allows (the cost
    /// is one round trip per write, and places already taken keep their time).
    fn landed(&self, chat: &ChatId, kind: ChatKind, write: Write<'_>) {
        let Some((every, _)) = self.spacing(kind, write) else {
            return;
        };
        let now = Instant::now();
        let mut state = self.lock();
        if let Some(tat) = state.budget.get_mut(chat) {
            *tat = (*tat).max(now + every);
        }
    }

    /// The minimum time between two writes of one message in a chat of this kind.
    pub fn interval(&self, kind: ChatKind) -> Duration {
        match kind {
            ChatKind::Private => self.private,
            ChatKind::Group => self.group,
        }
    }

    /// When `chat` may next be written to: after its pause, when its budget allows, and
    /// for an edit of an existing `message`, one interval after its last write. Possibly in
    /// the past.
    pub fn ready_at(&self, chat: &ChatId, kind: ChatKind, message: Option<&MessageId>) -> Instant {
        let state = self.lock();
        let paused = state.paused.get(chat).copied();
        let written = message
            .and_then(|m| state.written.get(&(chat.clone(), m.clone())))
            .map(|at| *at + self.interval(kind));
        let write = message.map_or(Write::New, Write::Edit);
        let budget = Self::budget_at(&state, chat, self.spacing(kind, write));
        let now = Instant::now();
        [paused, written, budget]
            .into_iter()
            .flatten()
            .fold(now, Instant::max)
    }

    /// When `chat`'s pause ends, if it is paused.
    fn paused_until(&self, chat: &ChatId) -> Option<Instant> {
        self.lock()
            .paused
            .get(chat)
            .copied()
            .filter(|at| *at > Instant::now())
    }

    fn pause(&self, chat: &ChatId, wait: Duration) {
        // A platform's retry-after is untrusted: one past the clock's range means "a very
        // long time", never a panic.
        let until = Instant::now()
            .checked_add(wait)
            .unwrap_or_else(|| Instant::now() + FAR_FUTURE);
        let mut state = self.lock();
        let now = Instant::now();
        let entry = state.paused.get(chat).copied();
        if entry.is_none_or(|old| old < until) {
            insert_bounded(
                &mut state.paused,
                chat.clone(),
                until,
                MAX_PAUSED_CHATS,
                |at| at <= now,
            );
        }
    }

    fn wrote(&self, chat: &ChatId, message: &MessageId) {
        let now = Instant::now();
        let longest = self.private.max(self.group);
        let mut state = self.lock();
        let key = (chat.clone(), message.clone());
        insert_bounded(&mut state.written, key, now, MAX_TRACKED_MESSAGES, |at| {
            at + longest <= now
        });
    }

    fn forget(&self, chat: &ChatId, message: &MessageId) {
        self.lock().written.remove(&(chat.clone(), message.clone()));
    }

    /// How many chats and messages the clock tracks (for tests of its bounds).
    #[cfg(test)]
    pub(crate) fn tracked(&self) -> (usize, usize) {
        let state = self.lock();
        (state.paused.len(), state.written.len())
    }

    /// How many chats' budgets the clock tracks (for tests of its bound).
    #[cfg(test)]
    pub(crate) fn budgets(&self) -> usize {
        self.lock().budget.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ClockState> {
        // Poisoning only means a panic elsewhere mid-update; the maps are still valid.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A value of a bounded map: the instant that orders its entries, and what it stands for.
pub(super) trait Stamped {
    /// The instant the entry is ordered by.
    fn stamp(&self) -> Instant;
}

impl Stamped for Instant {
    fn stamp(&self) -> Instant {
        *self
    }
}

impl<T> Stamped for (Instant, T) {
    fn stamp(&self) -> Instant {
        self.0
    }
}

/// Inserts into a map bounded by `cap`: first drops the entries `expired` says are
/// useless, then, still full, the one with the earliest instant.
pub(super) fn insert_bounded<K: Eq + Hash + Clone, V: Stamped>(
    map: &mut HashMap<K, V>,
    key: K,
    value: V,
    cap: usize,
    expired: impl Fn(Instant) -> bool,
) {
    if !map.contains_key(&key) && map.len() >= cap {
        map.retain(|_, v| !expired(v.stamp()));
        if map.len() >= cap
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, v)| v.stamp())
                .map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
    }
    map.insert(key, value);
}

/// The pacing layer (see the module docs).
#[derive(Debug)]
pub struct Throttle<C> {
    inner: C,
    clock: Arc<EditClock>,
}

impl<C: Channel> Throttle<C> {
    /// Paces `inner` by its own capabilities.
    pub fn new(inner: C) -> Self {
        let clock = Arc::new(EditClock::new(&inner.capabilities()));
        Self { inner, clock }
    }

    /// The clock, for schedulers that want to call only when it allows.
    pub fn clock(&self) -> &Arc<EditClock> {
        &self.clock
    }

    /// The wrapped channel.
    pub fn inner(&self) -> &C {
        &self.inner
    }

    /// Makes one `call` that writes to `to`'s chat (to message `id` when it exists
    /// already): first waits until the clock allows it, then records a Retry-After answer
    /// as a pause of the chat.
    async fn paced<T, F, Fut>(
        &self,
        to: SendTarget<'_>,
        write: Write<'_>,
        call: F,
    ) -> ChannelResult<T>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = ChannelResult<T>>,
    {
        self.ready(to, write).await?;
        let result = call().await;
        self.clock.landed(to.chat_id, to.chat_kind, write);
        if let Some(wait) = retry_after(&result) {
            self.clock.pause(to.chat_id, wait);
        }
        result
    }

    /// Waits until `to`'s chat may take this write: its pause, then its place in the
    /// chat's budget (taken now, so concurrent writes keep their order), and for an edit its
    /// message's interval.
    async fn ready(&self, to: SendTarget<'_>, write: Write<'_>) -> ChannelResult {
        let (chat, kind) = (to.chat_id, to.chat_kind);
        let not_before = match write {
            Write::Edit(id) => self.clock.ready_at(chat, kind, Some(id)),
            Write::New | Write::Upload | Write::Finish => {
                self.clock.paused_until(chat).unwrap_or_else(Instant::now)
            }
        };
        let wait = not_before.saturating_duration_since(Instant::now());
        if wait > MAX_PAUSE_WAIT {
            return Err(ChannelError::RetryAfter(wait));
        }
        let at = self.clock.reserve(chat, kind, write, not_before)?;
        if at > Instant::now() {
            tokio::time::sleep_until(at).await;
        }
        Ok(())
    }
}

/// The wait a failed call's Retry-After answer asks for, if that is how it failed.
fn retry_after<T>(result: &ChannelResult<T>) -> Option<Duration> {
    result.as_ref().err().and_then(RetryAfterHint::retry_after)
}

#[async_trait]
impl<C: Channel> Channel for Throttle<C> {
    forward_channel!(inner() => identity, name, capabilities, is_connected, exclusive_transport, run, show_typing, turn_ended, react, thread_of, fetch_file);

    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        self.paced(to, Write::New, || self.inner.send_text(to, text))
            .await
    }

    async fn start_stream(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        let sent = self
            .paced(to, Write::New, || self.inner.start_stream(to, text))
            .await?;
        self.clock.wrote(to.chat_id, &sent.id);
        Ok(sent)
    }

    async fn edit_text(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        self.paced(to, Write::Edit(id), || self.inner.edit_text(to, id, text))
            .await?;
        self.clock.wrote(to.chat_id, id);
        Ok(())
    }

    async fn finish_stream(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        let result = self
            .paced(to, Write::Finish, || self.inner.finish_stream(to, id, text))
            .await;
        // A finished message is never edited again; keep it only while a retry may come.
        if retry_after(&result).is_none() {
            self.clock.forget(to.chat_id, id);
        }
        result
    }

    async fn send_file(&self, to: SendTarget<'_>, file: &OutboundFile) -> ChannelResult {
        self.paced(to, Write::Upload, || self.inner.send_file(to, file))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::Writes;
    use crate::delivery::ChannelExt;
    use crate::delivery::recorder::{
        Call, Op, attachment, editable, layered, out, out_to, secs, target,
    };

    #[tokio::test(start_paused = true)]
    async fn edits_of_one_message_are_an_interval_apart_by_chat_kind() {
        for (kind, interval) in [(ChatKind::Private, 1.0), (ChatKind::Group, 3.0)] {
            let (rec, throttle) = layered(100, ChannelExt::throttle);
            let msg = out_to("s1", kind, "", false);
            let target = SendTarget::from(&msg);
            let sent = throttle.start_stream(target, "a").await.unwrap();
            throttle.edit_text(target, &sent.id, "ab").await.unwrap();
            // Another message of the chat is not held back by this one.
            throttle.send_text(target, "other").await.unwrap();
            throttle
                .finish_stream(target, &sent.id, "abc")
                .await
                .unwrap();
            let times: Vec<_> = rec.timed().into_iter().map(|(at, _)| at).collect();
            assert_eq!(
                times,
                // The finish is not held back by the interval (issue 13).
                [secs(0.0), secs(interval), secs(interval), secs(interval)]
            );
            assert_eq!(
                throttle.clock().tracked(),
                (0, 0),
                "finished messages are forgotten"
            );
        }
    }

    fn budgeted() -> Capabilities {
        Capabilities {
            chat_budget: Some(
                ChatBudget::new(Writes::MESSAGES_EDITS_FILES, 3, Duration::from_secs(1))
                    .in_groups(Duration::from_secs(3)),
            ),
            ..editable(100)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_budget_of_new_messages_lets_edits_and_finishes_pass() {
        // WeCom's: a stream counts once, however often it is refreshed.
        let caps = Capabilities {
            chat_budget: Some(ChatBudget::new(
                Writes::MESSAGES_FILES,
                2,
                Duration::from_secs(10),
            )),
            min_edit_interval_private: Duration::ZERO,
            ..editable(100)
        };
        let (rec, throttle) = crate::delivery::recorder::layered_with(caps, ChannelExt::throttle);
        let msg = out_to("s1", ChatKind::Private, "", false);
        let target = SendTarget::from(&msg);
        let sent = throttle.start_stream(target, "a").await.unwrap();
        for text in ["ab", "abc", "abcd"] {
            throttle.edit_text(target, &sent.id, text).await.unwrap();
        }
        throttle
            .finish_stream(target, &sent.id, "abcde")
            .await
            .unwrap();
        // The stream took one place; the second new message takes the burst's other, and
        // the third waits for the next interval, upload or text alike.
        throttle.send_text(target, "two").await.unwrap();
        throttle
            .send_file(target, &attachment("f.txt"))
            .await
            .unwrap();
        let times: Vec<_> = rec.timed().into_iter().map(|(at, _)| at).collect();
        let mut expected = vec![secs(0.0); 6];
        expected.push(secs(10.0));
        assert_eq!(times, expected);
        // With nothing counted, the clock schedules an edit with no wait.
        assert!(
            throttle
                .clock()
                .ready_at(target.chat_id, ChatKind::Private, Some(&sent.id))
                <= Instant::now()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn issue_13_a_chat_gets_its_burst_then_its_sustained_rate() {
        for (kind, every) in [(ChatKind::Private, 1.0), (ChatKind::Group, 3.0)] {
            let (rec, throttle) =
                crate::delivery::recorder::layered_with(budgeted(), ChannelExt::throttle);
            let here = out_to("s1", kind, "", false);
            let there = out_to("s2", kind, "", false);
            let there = SendTarget {
                chat_id: &ChatId::new("another chat"),
                ..SendTarget::from(&there)
            };
            for _ in 0..5 {
                throttle
                    .send_text(SendTarget::from(&here), "x")
                    .await
                    .unwrap();
            }
            // Another chat has a budget of its own.
            throttle.send_text(there, "y").await.unwrap();
            let times: Vec<_> = rec.timed().into_iter().map(|(at, _)| at).collect();
            assert_eq!(
                times,
                [
                    secs(0.0),
                    secs(0.0),
                    secs(0.0),
                    secs(every),
                    secs(2.0 * every),
                    secs(2.0 * every)
                ],
                "{kind:?}"
            );
            // A quiet chat gets its whole burst back, and no more.
            tokio::time::sleep(secs(100.0)).await;
            let start = tokio::time::Instant::now();
            for _ in 0..4 {
                throttle
                    .send_text(SendTarget::from(&here), "z")
                    .await
                    .unwrap();
            }
            assert_eq!(start.elapsed(), secs(every), "{kind:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn issue_13_an_instant_answer_costs_no_fixed_wait() {
        // The placeholder, then the finished answer at once: two writes within the burst.
        let (rec, throttle) =
            crate::delivery::recorder::layered_with(budgeted(), ChannelExt::throttle);
        let msg = out_to("s1", ChatKind::Group, "", false);
        let target = SendTarget::from(&msg);
        let sent = throttle
            .start_stream(target, "Working on it…")
            .await
            .unwrap();
        throttle
            .finish_stream(target, &sent.id, "Done.")
            .await
            .unwrap();
        let times: Vec<_> = rec.timed().into_iter().map(|(at, _)| at).collect();
        assert_eq!(times, [secs(0.0), secs(0.0)]);
    }

    #[tokio::test(start_paused = true)]
    async fn issue_13_a_write_counts_from_its_answer_so_jitter_cannot_oversubscribe() {
        let clock = EditClock::new(&budgeted());
        let chat = ChatId::new("c1");
        let start = Instant::now();
        let place =
            |clock: &EditClock| clock.reserve(&chat, ChatKind::Private, Write::New, Instant::now());
        // The burst's first write is answered only after 0.5 s: the platform may have
        // counted it as late as that.
        assert_eq!(place(&clock).unwrap(), start);
        tokio::time::sleep(secs(0.5)).await;
        clock.landed(&chat, ChatKind::Private, Write::New);
        for _ in 0..2 {
            assert_eq!(place(&clock).unwrap(), start + secs(0.5));
            clock.landed(&chat, ChatKind::Private, Write::New);
        }
        // The next place is a second after that answer, not after the call.
        assert_eq!(place(&clock).unwrap(), start + secs(1.5));
    }

    #[tokio::test(start_paused = true)]
    async fn issue_13_budgets_are_bounded_and_a_far_place_fails_at_once() {
        let clock = EditClock::new(&budgeted());
        for i in 0..MAX_BUDGET_CHATS + 10 {
            clock
                .reserve(
                    &ChatId::new(format!("c{i}")),
                    ChatKind::Private,
                    Write::New,
                    tokio::time::Instant::now(),
                )
                .unwrap();
        }
        assert!(clock.budgets() <= MAX_BUDGET_CHATS);
        // Places further out than the pause bound are refused, not queued for minutes.
        let busy = ChatId::new("busy group");
        let mut refused = None;
        for _ in 0..100 {
            if let Err(e) = clock.reserve(
                &busy,
                ChatKind::Group,
                Write::New,
                tokio::time::Instant::now(),
            ) {
                refused = Some(e);
                break;
            }
        }
        assert!(
            matches!(refused, Some(ChannelError::RetryAfter(_))),
            "{refused:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_pauses_every_call_in_the_chat() {
        let (rec, throttle) = layered(100, ChannelExt::throttle);
        rec.fail(Op::Send, ChannelError::RetryAfter(Duration::from_secs(4)));
        let err = throttle.send_text(target(), "a").await.unwrap_err();
        assert!(matches!(err, ChannelError::RetryAfter(_)), "reported as is");
        throttle.send_text(target(), "b").await.unwrap();
        assert_eq!(rec.timed(), [(secs(4.0), Call::Send("b".into()))]);
        // Other chats are not paused.
        let mut elsewhere = out("", true);
        elsewhere.chat_id = "c2".into();
        rec.fail(Op::Send, ChannelError::RetryAfter(Duration::from_secs(4)));
        let _ = throttle.send_text(target(), "c").await;
        throttle
            .send_text(SendTarget::from(&elsewhere), "d")
            .await
            .unwrap();
        assert_eq!(
            rec.timed().last(),
            Some(&(secs(4.0), Call::Send("d".into())))
        );
    }

    /// After a `Retry-After` of `wait`, longer than [`MAX_PAUSE_WAIT`], the chat's next
    /// call fails at once and leaves the platform alone.
    async fn a_pause_past_the_bound_fails_at_once(wait: Duration) {
        let (rec, throttle) = layered(100, ChannelExt::throttle);
        rec.fail(Op::Send, ChannelError::RetryAfter(wait));
        let _ = throttle.send_text(target(), "a").await;
        let err = throttle.send_text(target(), "b").await.unwrap_err();
        assert!(matches!(err, ChannelError::RetryAfter(d) if d > MAX_PAUSE_WAIT));
        assert_eq!(rec.attempts(Op::Send), 1, "the platform is left alone");
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_longer_than_the_bound_fails_at_once() {
        a_pause_past_the_bound_fails_at_once(Duration::from_secs(3600)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_after_past_the_clock_range_pauses_without_panicking() {
        a_pause_past_the_bound_fails_at_once(Duration::MAX).await;
    }

    #[tokio::test(start_paused = true)]
    async fn the_clock_stays_bounded() {
        let clock = EditClock::new(&editable(100));
        for i in 0..MAX_TRACKED_MESSAGES + 10 {
            clock.wrote(&ChatId::from("c1"), &MessageId::new(i.to_string()));
            clock.pause(
                &ChatId::from(format!("c{i}").as_str()),
                Duration::from_secs(60),
            );
        }
        assert_eq!(clock.tracked(), (MAX_PAUSED_CHATS, MAX_TRACKED_MESSAGES));
        // Entries whose interval or pause has passed make room before anything live does.
        tokio::time::sleep(Duration::from_secs(61)).await;
        clock.wrote(&ChatId::from("c1"), &MessageId::new("new"));
        clock.pause(&ChatId::from("new"), Duration::from_secs(1));
        assert_eq!(clock.tracked(), (1, 1));
    }
}
