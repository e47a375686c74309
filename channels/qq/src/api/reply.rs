//! The passive-reply budget of one source message (spec platforms.md §6.3).
//!
//! QQ lets a bot answer a user's message, never speak first: a reply names the source
//! `msg_id` and a `msg_seq`, and QQ accepts it only within the window after the source was
//! sent ([`GROUP_WINDOW`], [`C2C_WINDOW`]), at most [`MAX_REPLIES`] times per source, and
//! never twice with the same `msg_seq`. QQ's "send message" page
//! (bot.q.qq.com/wiki/develop/api-v2/server-inter/message/send-receive/send.html, kept in
//! tencent-connect/bot-docs as `docs/develop/api-v2/server-inter/message/send-receive/send.md`)
//! states these numbers and that proactive pushes "are no longer provided from 2025-04-21;
//! calls get an error"; bots report that error as code 40034102 "主动消息失败, 无权限"
//! (tencent-connect/openclaw-qqbot#43). The one exception since 2026-01-10, a C2C
//! "interactive recall" message (`is_wakeup`, one per period of 0/1–3/3–7/7–30 days after
//! the user's last message), is not used: it carries one message, not an answer.
//!
//! A [`ReplyContext`] is that budget for one (chat, source message), shared by everything
//! answering it (the objective of `/goal from-chat` and the run's answer use one budget).
//! [`ReplyContext::begin`] is called before each attempt: it refuses once the window has
//! closed or the replies are used up, and otherwise hands out the next `msg_seq` and
//! counts the reply as used. The seq is taken *before* the request, because a request that
//! timed out may still have been delivered and a reused seq would fail. An attempt that
//! certainly did not reach the chat (QQ refused it, or the token was refused at the door)
//! gives its reply back with [`ReplyContext::refund`]; its seq stays spent. A keyed reply
//! ([`keyed_seq`]) tried again under its seq is the same reply, counted once: QQ shows a
//! seq at most once, so a timed-out attempt and its retry cannot both use the budget.
//!
//! [`ReplyBook`] keeps the contexts of recent source messages, bounded by
//! [`MAX_CONTEXTS`]: at the bound, contexts whose window has closed go first, then the
//! oldest. Its contexts hand out seqs past a base drawn at random when the book is made
//! (once per process, [`SEQ_BASES`]): QQ remembers the seqs a source was answered with,
//! and a restarted bridge that began at 1 again would have the answer it finishes after a
//! crash refused as a duplicate of a reply sent before it (a "waiting" notice), for good.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use im_bridge_channel::http::{self, HttpError};
use im_bridge_channel::{ChatId, MessageId};
use tokio::sync::Mutex;

use crate::error::ApiError;

/// How long after a group message QQ accepts replies to it.
pub const GROUP_WINDOW: Duration = Duration::from_secs(5 * 60);
/// How long after a direct (C2C) message QQ accepts replies to it.
pub const C2C_WINDOW: Duration = Duration::from_secs(60 * 60);
/// How many replies one source message allows.
pub const MAX_REPLIES: u32 = 5;
/// How many reply contexts a [`ReplyBook`] keeps.
pub const MAX_CONTEXTS: usize = 2048;
/// Longest openid accepted into a URL path (real ones are 32 hex digits).
const MAX_OPENID_LEN: usize = 128;
/// How many seq bases a book draws from: base `n` hands out seqs from `n * SEQ_SPAN + 1`,
/// so two processes share one with a chance of one in 2²⁴ (and then only a source answered
/// by both could meet a repeated seq).
pub const SEQ_BASES: u32 = (1 << 24) - 1;
/// The seqs of one base, far more than one source's replies take (a reply, refused or not,
/// spends one; at most [`MAX_REPLIES`] land).
const SEQ_SPAN: u32 = 64;
/// Where the seqs of keyed replies ([`keyed_seq`]) start: past every base's.
const KEYED_SEQS: u32 = 1 << 30;

/// The `msg_seq` of a reply the daemon named ([`DeliveryHints::send_key_hash`]): the same
/// for every attempt at it, after a restart too, so that QQ refuses a second send of a
/// reply that landed unacknowledged as a duplicate (the adapter takes that refusal as
/// "landed") instead of showing it twice. An even number in `2³⁰..2³¹`, apart from the
/// counted seqs; the odd one after it is its [`defanged_seq`].
///
/// [`DeliveryHints::send_key_hash`]: im_bridge_channel::DeliveryHints::send_key_hash
pub fn keyed_seq(hash: u64) -> u32 {
    KEYED_SEQS | (u32::try_from(hash >> 35).unwrap_or(0) << 1)
}

/// The `msg_seq` of a keyed reply sent again with its links defanged, after QQ refused it
/// for a link (`api::links`): the same for every attempt, like the keyed seq itself, and
/// never one QQ saw, refused or not (no keyed seq is odd). QQ's documents do not say
/// whether a refused send spends its seq, so the refused one is not reused.
pub fn defanged_seq(keyed: u32) -> u32 {
    keyed | 1
}

/// The `msg_seq` of part `n` (1 the first after the part the reply's own seq carries) of
/// the keyed reply whose defanged seq is `defanged`, when the defanged text outgrew one
/// message: the same for every attempt, like the defanged seq itself, so a retry shows
/// each part once. Odd (no keyed seq is) and in `2³⁰..2³¹`, drawn from `defanged` and
/// `n` by a 64-bit mix (SplitMix64's finalizer), so two parts, or two replies' parts,
/// share one only by a 1-in-2²⁹ chance.
pub fn defanged_part_seq(defanged: u32, n: usize) -> u32 {
    let n = u64::try_from(n).unwrap_or(u64::MAX);
    let mut z = (u64::from(defanged) << 32 ^ n).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    defanged_seq(keyed_seq(z ^ (z >> 31)))
}

/// Where a reply goes: a group or a user, by openid.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// A group chat: `POST /v2/groups/{group_openid}/messages`.
    Group(String),
    /// A direct chat: `POST /v2/users/{openid}/messages`.
    User(String),
}

impl Target {
    /// The chat id prefix of group chats.
    pub const GROUP_PREFIX: &'static str = "group:";
    /// The chat id prefix of direct chats.
    pub const C2C_PREFIX: &'static str = "c2c:";

    /// The target of a chat id made by the adapter (`group:<openid>` or `c2c:<openid>`);
    /// the openid must be letters, digits, `_` or `-`, so it can go into a URL path.
    pub fn from_chat_id(chat: &ChatId) -> Result<Self, ApiError> {
        let text = chat.as_str();
        let (openid, target): (&str, fn(String) -> Self) =
            if let Some(id) = text.strip_prefix(Self::GROUP_PREFIX) {
                (id, Self::Group)
            } else if let Some(id) = text.strip_prefix(Self::C2C_PREFIX) {
                (id, Self::User)
            } else {
                return Err(bad("chat id", text));
            };
        if http::is_plain_id(openid, MAX_OPENID_LEN) {
            Ok(target(openid.to_owned()))
        } else {
            Err(bad("chat id", text))
        }
    }

    /// The chat id of this target.
    pub fn chat_id(&self) -> ChatId {
        match self {
            Self::Group(id) => ChatId::new(format!("{}{id}", Self::GROUP_PREFIX)),
            Self::User(id) => ChatId::new(format!("{}{id}", Self::C2C_PREFIX)),
        }
    }

    /// How long after the source message replies are accepted.
    pub fn window(&self) -> Duration {
        match self {
            Self::Group(_) => GROUP_WINDOW,
            Self::User(_) => C2C_WINDOW,
        }
    }

    /// The REST path replies are posted to.
    pub fn path(&self) -> String {
        match self {
            Self::Group(id) => format!("/v2/groups/{id}/messages"),
            Self::User(id) => format!("/v2/users/{id}/messages"),
        }
    }
}

fn bad(what: &'static str, value: &str) -> ApiError {
    HttpError::bad_id(what, value).into()
}

/// The reply budget of one source message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplyContext {
    target: Target,
    source: MessageId,
    window_end: SystemTime,
    /// Replies that reached, or may have reached, the chat (at most [`MAX_REPLIES`]).
    used: u32,
    /// The last `msg_seq` handed out; 0 before the first.
    last_seq: u32,
    /// The keyed seqs counted in `used` (at most [`MAX_REPLIES`]): another attempt under
    /// one of them is the same reply (QQ shows a seq once), not one more.
    keyed: Vec<u32>,
    /// What the last attempt counted, for [`ReplyContext::refund`] to give back.
    last: Counted,
}

/// What one attempt counted as used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Counted {
    /// Nothing: it repeated a keyed reply counted before (or none began).
    Nothing,
    /// One reply under a counted seq.
    Reply,
    /// One reply under this keyed seq.
    Keyed(u32),
}

impl ReplyContext {
    /// The budget of replies to `source` in `target`, a message sent at `sent_at`; its
    /// first `msg_seq` is 1.
    pub fn new(target: Target, source: MessageId, sent_at: SystemTime) -> Self {
        let window_end = sent_at + target.window();
        Self {
            target,
            source,
            window_end,
            used: 0,
            last_seq: 0,
            keyed: Vec::new(),
            last: Counted::Nothing,
        }
    }

    /// This budget handing out `msg_seq`s after `seq` (the first is `seq + 1`).
    fn after_seq(self, seq: u32) -> Self {
        Self {
            last_seq: seq,
            ..self
        }
    }

    /// Where replies go.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The source message replies answer.
    pub fn source(&self) -> &MessageId {
        &self.source
    }

    /// When the window closes.
    #[cfg(test)]
    pub fn window_end(&self) -> SystemTime {
        self.window_end
    }

    /// Whether replies are still accepted at `now` (as far as time goes).
    pub fn is_open(&self, now: SystemTime) -> bool {
        now < self.window_end
    }

    /// Replies used so far (sent, or possibly sent).
    #[cfg(test)]
    pub fn used(&self) -> u32 {
        self.used
    }

    /// Replies still allowed at `now`: 0 once the window has closed.
    #[cfg(test)]
    pub fn remaining(&self, now: SystemTime) -> u32 {
        if self.is_open(now) {
            MAX_REPLIES.saturating_sub(self.used)
        } else {
            0
        }
    }

    /// The last `msg_seq` handed out (0 before the first).
    #[cfg(test)]
    pub fn last_seq(&self) -> u32 {
        self.last_seq
    }

    /// Starts one attempt at `now`: the next `msg_seq`, or `keyed` for a reply that has its
    /// own ([`keyed_seq`]; the counted seqs are left as they are then), with the reply
    /// counted as used, unless it is a keyed one counted before (a timed-out attempt that
    /// may have landed, tried again: at most one of them is shown). Refused with
    /// [`ApiError::WindowClosed`] or [`ApiError::RepliesExhausted`], and then nothing
    /// changes.
    pub fn begin(&mut self, now: SystemTime, keyed: Option<u32>) -> Result<u32, ApiError> {
        if !self.is_open(now) {
            return Err(ApiError::WindowClosed);
        }
        if let Some(seq) = keyed
            && self.keyed.contains(&seq)
        {
            self.last = Counted::Nothing;
            return Ok(seq);
        }
        if self.used >= MAX_REPLIES {
            return Err(ApiError::RepliesExhausted);
        }
        self.used += 1;
        if let Some(seq) = keyed {
            self.keyed.push(seq);
            self.last = Counted::Keyed(seq);
            return Ok(seq);
        }
        self.last = Counted::Reply;
        self.last_seq = self.last_seq.wrapping_add(1).max(1);
        Ok(self.last_seq)
    }

    /// Whether keyed seq `seq` is counted here (a reply sent, or maybe sent, under it).
    pub fn holds_keyed(&self, seq: u32) -> bool {
        self.keyed.contains(&seq)
    }

    /// QQ said the source takes no more replies: the window is over now, whatever the
    /// budget's own count said.
    pub fn close(&mut self) {
        self.window_end = std::time::UNIX_EPOCH;
    }

    /// The last attempt certainly did not reach the chat: what it counted is given back
    /// (nothing when it repeated a keyed reply that may have landed before). Its
    /// `msg_seq` is not: a counted seq is never handed out again.
    pub fn refund(&mut self) {
        match std::mem::replace(&mut self.last, Counted::Nothing) {
            Counted::Nothing => {}
            Counted::Reply => self.used = self.used.saturating_sub(1),
            Counted::Keyed(seq) => {
                self.used = self.used.saturating_sub(1);
                self.keyed.retain(|&k| k != seq);
            }
        }
    }
}

/// One context, shared by the replies that answer its source.
pub type SharedContext = Arc<Mutex<ReplyContext>>;

/// The reply contexts of recent source messages, by (chat, source), at most
/// [`MAX_CONTEXTS`].
#[derive(Debug)]
pub struct ReplyBook {
    contexts: HashMap<(ChatId, MessageId), (u64, SharedContext)>,
    /// Insertion counter, to find the oldest context.
    next: u64,
    /// The seq each new context's first reply follows.
    seq_base: u32,
}

impl Default for ReplyBook {
    fn default() -> Self {
        Self::new()
    }
}

impl ReplyBook {
    /// An empty book, its seqs past a base drawn at random (see the module docs).
    pub fn new() -> Self {
        Self::with_seq_base(rand::random_range(0..SEQ_BASES))
    }

    /// An empty book whose contexts' seqs start after base `n`'s first.
    fn with_seq_base(n: u32) -> Self {
        Self {
            contexts: HashMap::new(),
            next: 0,
            seq_base: n.min(SEQ_BASES - 1) * SEQ_SPAN,
        }
    }

    /// How many contexts are kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.contexts.len()
    }

    /// The context of replies to `source` in `target`, created (for a message sent at
    /// `sent_at`) when it is new. At the bound, room is made first: every context whose
    /// window has closed by `now`, or else the oldest one.
    pub fn context(
        &mut self,
        target: Target,
        source: MessageId,
        sent_at: SystemTime,
        now: SystemTime,
    ) -> SharedContext {
        let key = (target.chat_id(), source.clone());
        if let Some((_, shared)) = self.contexts.get(&key) {
            return shared.clone();
        }
        if self.contexts.len() >= MAX_CONTEXTS {
            self.contexts.retain(|_, (_, shared)| {
                // A context in use (locked) is kept: its window is open or its reply
                // is on the wire.
                shared.try_lock().map_or(true, |c| c.is_open(now))
            });
        }
        if self.contexts.len() >= MAX_CONTEXTS
            && let Some(oldest) = self
                .contexts
                .iter()
                .min_by_key(|(_, (n, _))| *n)
                .map(|(k, _)| k.clone())
        {
            self.contexts.remove(&oldest);
        }
        let context = ReplyContext::new(target, source, sent_at).after_seq(self.seq_base);
        let shared = Arc::new(Mutex::new(context));
        self.next += 1;
        self.contexts.insert(key, (self.next, shared.clone()));
        shared
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
    }

    #[test]
    fn chat_ids_name_their_target() {
        let group = Target::from_chat_id(&ChatId::new("group:ABCDEF0123")).unwrap();
        assert_eq!(group, Target::Group("ABCDEF0123".into()));
        assert_eq!(group.path(), "/v2/groups/ABCDEF0123/messages");
        assert_eq!(group.window(), GROUP_WINDOW);
        assert_eq!(group.chat_id().as_str(), "group:ABCDEF0123");
        let user = Target::from_chat_id(&ChatId::new("c2c:u-1_x")).unwrap();
        assert_eq!(user.path(), "/v2/users/u-1_x/messages");
        assert_eq!(user.window(), C2C_WINDOW);
        for bad in ["group:", "c2c:a/b", "dm:x", "group:../x", "c2c:a?b"] {
            assert!(
                matches!(
                    Target::from_chat_id(&ChatId::new(bad)),
                    Err(ApiError::Http(HttpError::BadId { .. }))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn five_replies_each_with_a_new_seq_then_none() {
        let mut ctx = ReplyContext::new(Target::Group("g".into()), MessageId::new("m"), at(0));
        assert_eq!(ctx.remaining(at(1)), MAX_REPLIES);
        let seqs: Vec<u32> = (0..5).map(|_| ctx.begin(at(1), None).unwrap()).collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5]);
        assert_eq!(ctx.remaining(at(1)), 0);
        assert!(matches!(
            ctx.begin(at(1), None),
            Err(ApiError::RepliesExhausted)
        ));
        assert_eq!(ctx.last_seq(), 5, "a refusal hands out no seq");
    }

    #[test]
    fn a_refund_gives_the_reply_back_but_never_the_seq() {
        let mut ctx = ReplyContext::new(Target::User("u".into()), MessageId::new("m"), at(0));
        assert_eq!(ctx.begin(at(1), None).unwrap(), 1);
        ctx.refund();
        assert_eq!(ctx.used(), 0);
        assert_eq!(ctx.begin(at(1), None).unwrap(), 2);
        assert_eq!(ctx.used(), 1);
        ctx.refund();
        ctx.refund();
        assert_eq!(ctx.used(), 0, "never below zero");
    }

    #[test]
    fn a_keyed_reply_tried_again_counts_once() {
        let mut ctx = ReplyContext::new(Target::User("u".into()), MessageId::new("m"), at(0));
        let key = keyed_seq(7 << 40);
        // Timed out (it may have landed), then tried again: one reply, not two.
        assert_eq!(ctx.begin(at(1), Some(key)).unwrap(), key);
        assert_eq!(ctx.begin(at(1), Some(key)).unwrap(), key);
        assert_eq!(ctx.used(), 1);
        // The repeat certainly did not land; the first still may have.
        ctx.refund();
        assert_eq!(ctx.used(), 1);
        // Four more replies fit, as QQ allows five; a repeat still goes when all are used.
        for n in 0..4 {
            ctx.begin(at(1), Some(keyed_seq((100 + n) << 40))).unwrap();
        }
        assert!(matches!(
            ctx.begin(at(1), None),
            Err(ApiError::RepliesExhausted)
        ));
        assert_eq!(ctx.begin(at(1), Some(key)).unwrap(), key);
        // A keyed attempt that certainly did not land gives its reply back, and the next
        // attempt under that seq counts again.
        let mut ctx = ReplyContext::new(Target::User("u".into()), MessageId::new("m"), at(0));
        ctx.begin(at(1), Some(key)).unwrap();
        ctx.refund();
        assert_eq!(ctx.used(), 0);
        ctx.begin(at(1), Some(key)).unwrap();
        assert_eq!(ctx.used(), 1);
        // Past its window, no attempt goes, a repeat neither.
        assert!(matches!(
            ctx.begin(at(4000), Some(key)),
            Err(ApiError::WindowClosed)
        ));
    }

    #[test]
    fn the_window_closes_after_five_minutes_in_groups_and_an_hour_in_c2c() {
        let mut group = ReplyContext::new(Target::Group("g".into()), MessageId::new("m"), at(0));
        assert!(group.begin(at(299), None).is_ok());
        assert!(matches!(
            group.begin(at(300), None),
            Err(ApiError::WindowClosed)
        ));
        assert_eq!(group.remaining(at(300)), 0);
        assert_eq!(group.used(), 1);
        let mut c2c = ReplyContext::new(Target::User("u".into()), MessageId::new("m"), at(0));
        assert!(c2c.begin(at(3599), None).is_ok());
        assert!(matches!(
            c2c.begin(at(3600), None),
            Err(ApiError::WindowClosed)
        ));
        assert_eq!(c2c.window_end(), at(3600));
    }

    #[tokio::test]
    async fn each_book_answers_a_source_with_seqs_past_its_own_base() {
        let target = Target::User("u".into());
        let seqs = |book: &mut ReplyBook| {
            let shared = book.context(target.clone(), MessageId::new("m"), at(0), at(1));
            let mut ctx = shared.try_lock().unwrap();
            [
                ctx.begin(at(1), None).unwrap(),
                ctx.begin(at(1), None).unwrap(),
            ]
        };
        // A bridge started again answers the same source with seqs it never used before.
        let before = seqs(&mut ReplyBook::with_seq_base(7));
        let after = seqs(&mut ReplyBook::with_seq_base(8));
        assert_eq!(before, [7 * SEQ_SPAN + 1, 7 * SEQ_SPAN + 2]);
        assert_eq!(after, [8 * SEQ_SPAN + 1, 8 * SEQ_SPAN + 2]);
        // Every base's seqs are positive and fit QQ's int32 field.
        let first = seqs(&mut ReplyBook::with_seq_base(0));
        assert_eq!(first, [1, 2]);
        let last = seqs(&mut ReplyBook::with_seq_base(u32::MAX));
        assert!(
            last.iter().all(|&s| s > 0 && i32::try_from(s).is_ok()),
            "{last:?}"
        );
        // Keyed seqs stand apart from every base's.
        let highest = (SEQ_BASES - 1) * SEQ_SPAN + SEQ_SPAN;
        assert!(highest < keyed_seq(0) && keyed_seq(u64::MAX) <= i32::MAX as u32);
        // A defanged resend's seq is no keyed reply's, and fits too.
        for hash in [0, 1 << 35, u64::MAX, 0x0123_4567_89ab_cdef] {
            let seq = keyed_seq(hash);
            assert!(seq.is_multiple_of(2), "{seq}");
            assert_ne!(defanged_seq(seq), seq);
            assert!(!defanged_seq(seq).is_multiple_of(2));
            assert!(defanged_seq(seq) <= i32::MAX as u32);
            // Its parts' seqs: odd and in the keyed range too, stable, each its own.
            let defanged = defanged_seq(seq);
            let parts: Vec<u32> = (1..=4).map(|n| defanged_part_seq(defanged, n)).collect();
            assert_eq!(parts[0], defanged_part_seq(defanged, 1));
            for part in &parts {
                assert!(!part.is_multiple_of(2) && *part > highest, "{part}");
                assert!(*part <= i32::MAX as u32 && *part != defanged);
            }
            let mut distinct = parts.clone();
            distinct.sort_unstable();
            distinct.dedup();
            assert_eq!(distinct.len(), parts.len(), "{parts:?}");
        }
        let drawn = ReplyBook::new().seq_base;
        assert!(drawn.is_multiple_of(SEQ_SPAN) && drawn / SEQ_SPAN < SEQ_BASES);
    }

    #[tokio::test]
    async fn the_book_shares_a_context_and_stays_bounded() {
        let mut book = ReplyBook::new();
        let target = Target::Group("g".into());
        let a = book.context(target.clone(), MessageId::new("m0"), at(0), at(1));
        a.lock().await.begin(at(1), None).unwrap();
        let again = book.context(target.clone(), MessageId::new("m0"), at(0), at(1));
        assert_eq!(again.lock().await.used(), 1, "the same budget");
        for i in 1..MAX_CONTEXTS {
            book.context(
                target.clone(),
                MessageId::new(format!("m{i}")),
                at(0),
                at(1),
            );
        }
        assert_eq!(book.len(), MAX_CONTEXTS);
        // Full and nothing expired: the oldest goes.
        book.context(target.clone(), MessageId::new("new"), at(0), at(1));
        assert_eq!(book.len(), MAX_CONTEXTS);
        let fresh = book.context(target.clone(), MessageId::new("m0"), at(0), at(1));
        assert_eq!(fresh.lock().await.used(), 0, "m0 was evicted");
        // Full with every window closed: they all go.
        book.context(target, MessageId::new("late"), at(400), at(400));
        assert_eq!(book.len(), 1);
    }
}
