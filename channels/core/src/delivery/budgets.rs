//! `Budgets`: keeps a channel's writes within its [`RateBudget`]s (issue 33).
//!
//! The lowest layer that waits (below it only `Newest` and `Fenced`, which do not), so a
//! token is taken just before the call that spends it, for every write the engine makes
//! (retries and split chunks included).
//! Each call draws on every budget whose [`Writes`] include it:
//!
//! - **A final** (`send_text`, `finish_stream`, `send_file`) waits for its token, for at
//!   most [`MAX_PAUSE_WAIT`]; past that it fails with [`ChannelError::OverBudget`] and
//!   nothing is sent (the daemon's journal retries it later). Waiters of one budget are
//!   served in call order.
//! - **A partial update** (`start_stream`, `edit_text`) or **the typing hint** takes a
//!   token only if one is free at once; otherwise it fails with `OverBudget` and nothing is
//!   sent: the stream keeps the text pending and shows the newest one once the budget has
//!   room (streams.rs), and the final shows it anyway. Partials never queue behind finals.
//!
//! Where tokens come from is the [`BudgetPlan`]'s choice: an in-process bucket per budget
//! (the default), or a [`TokenSource`] several replicas share. A shared source is asked for
//! a few tokens at a time, what the budget earns in [`BATCH_WINDOW`] (at least one, at most
//! half the burst), and tokens not spent within that window are dropped, so a token is
//! never spent more than [`BATCH_WINDOW`] after the source counted it; at a token per call
//! that is one store call per write, at Telegram's 30/s one per three. While the shared
//! source does not answer (within [`SHARED_TIMEOUT`]), the budget is kept in-process and
//! the source is asked again after [`SHARED_RETRY`] (counted in [`BUDGET_FALLBACKS`]).
//!
//! Reading an inbound file (`fetch_file`), `turn_ended` and reactions pass through unpaced.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::budget::{Grant, LocalBucket, TokenSource};
use crate::capabilities::{Capabilities, RateBudget, Writes};
use crate::channel::{Channel, SendTarget, SentMessage};
use crate::error::{ChannelError, ChannelResult};
use crate::ids::MessageId;
use crate::message::OutboundFile;

use super::forward_channel;
use super::throttle::MAX_PAUSE_WAIT;

/// Counter: finals that waited for a rate budget's token, by `channel` and `budget`.
pub const BUDGET_WAITS: &str = "im_bridge_rate_budget_waits_total";
/// Counter: partial updates and typing hints not sent because a rate budget was short, by
/// `channel` and `budget`.
pub const BUDGET_SKIPS: &str = "im_bridge_rate_budget_skips_total";
/// Counter: times a shared rate budget's store did not answer and the budget was kept in
/// this process instead, by `channel` and `budget`.
pub const BUDGET_FALLBACKS: &str = "im_bridge_rate_budget_store_fallbacks_total";

/// How far ahead a replica takes tokens from a shared source (see the module docs).
pub const BATCH_WINDOW: Duration = Duration::from_millis(100);
/// The longest a shared source may take to answer before the budget is kept in-process.
pub const SHARED_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a budget stays in-process after its shared source failed to answer.
pub const SHARED_RETRY: Duration = Duration::from_secs(5);

/// The rate budgets one channel is kept within, and where their tokens come from.
#[derive(Clone, Debug, Default)]
pub struct BudgetPlan {
    /// The budgets (the channel's declared ones, as the operator adjusted them).
    pub budgets: Vec<RateBudget>,
    /// The source several replicas share; `None`: each budget is kept in this process.
    pub shared: Option<Arc<dyn TokenSource>>,
}

impl BudgetPlan {
    /// The budgets `caps` declares, kept in this process.
    pub fn declared(caps: &Capabilities) -> Self {
        Self {
            budgets: caps.rate_budgets.to_vec(),
            shared: None,
        }
    }
}

/// Which family of [`Writes`] a call belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Messages,
    Edits,
    Files,
    Typing,
}

impl Family {
    fn draws_on(self, writes: &Writes) -> bool {
        match self {
            Family::Messages => writes.messages,
            Family::Edits => writes.edits,
            Family::Files => writes.files,
            Family::Typing => writes.typing,
        }
    }
}

/// Tokens taken from a source and not spent yet, and what the source last said.
#[derive(Debug)]
struct Held {
    /// Tokens in hand, valid until `until`.
    tokens: u32,
    until: Instant,
    /// The source said no token is free before this.
    short_until: Instant,
    /// The shared source failed; it is asked again from this instant.
    degraded_until: Option<Instant>,
}

/// One budget of one channel.
#[derive(Debug)]
struct Gate {
    budget: RateBudget,
    channel: &'static str,
    /// The budget's key in a shared source: `<channel>:<budget>`.
    key: String,
    shared: Option<Arc<dyn TokenSource>>,
    /// The budget in this process: the bucket itself, or the fallback of a shared one.
    local: LocalBucket,
    /// Tokens asked of the shared source at once.
    batch: u32,
    /// Held across a take, so waiting finals are served in order (tokio's lock is fair).
    held: tokio::sync::Mutex<Held>,
}

impl Gate {
    fn new(
        channel: &'static str,
        budget: RateBudget,
        shared: Option<Arc<dyn TokenSource>>,
    ) -> Self {
        let earned = BATCH_WINDOW.as_nanos() / budget.every.as_nanos().max(1);
        let batch = u32::try_from(earned)
            .unwrap_or(u32::MAX)
            .min(budget.burst / 2)
            .max(1);
        let now = Instant::now();
        Self {
            key: format!("{channel}:{}", budget.name),
            budget,
            channel,
            shared,
            local: LocalBucket::default(),
            batch,
            held: tokio::sync::Mutex::new(Held {
                tokens: 0,
                until: now,
                short_until: now,
                degraded_until: None,
            }),
        }
    }

    /// A token now, or how long until one may be free; never waits for other callers.
    async fn try_take(&self) -> Result<(), Duration> {
        match self.held.try_lock() {
            Ok(mut held) => self.take_held(&mut held).await,
            // A final is waiting for the budget or a fetch is under way: it is short.
            Err(_) => Err(self.budget.every),
        }
    }

    /// Waits for a token, in call order, for at most `bound`; `Err` with the wait left
    /// when the bound would run out first.
    async fn take(&self, bound: Duration) -> Result<bool, Duration> {
        let deadline = Instant::now() + bound;
        let mut held = tokio::time::timeout_at(deadline, self.held.lock())
            .await
            .map_err(|_| bound)?;
        let mut waited = false;
        loop {
            match self.take_held(&mut held).await {
                Ok(()) => return Ok(waited),
                Err(wait) if Instant::now() + wait > deadline => return Err(wait),
                Err(wait) => {
                    waited = true;
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    async fn take_held(&self, held: &mut Held) -> Result<(), Duration> {
        let now = Instant::now();
        if held.tokens > 0 && now < held.until {
            held.tokens -= 1;
            return Ok(());
        }
        held.tokens = 0;
        if now < held.short_until {
            return Err(held.short_until - now);
        }
        let grant = self.fetch(held).await;
        let now = Instant::now();
        if grant.granted == 0 {
            held.short_until = now + grant.retry_in;
            return Err(grant.retry_in);
        }
        held.tokens = grant.granted - 1;
        held.until = now + BATCH_WINDOW;
        Ok(())
    }

    /// Tokens from the shared source, or from this process while it is not shared or down.
    async fn fetch(&self, held: &mut Held) -> Grant {
        let shared = self
            .shared
            .as_ref()
            .filter(|_| held.degraded_until.is_none_or(|at| Instant::now() >= at));
        let Some(source) = shared else {
            return self.local.take_now(&self.budget, 1);
        };
        let asked = tokio::time::timeout(
            SHARED_TIMEOUT,
            source.take(&self.key, &self.budget, self.batch),
        )
        .await;
        match asked {
            Ok(Ok(grant)) => {
                if held.degraded_until.take().is_some() {
                    tracing::info!(
                        channel = self.channel,
                        budget = self.budget.name,
                        "The shared rate budget answers again."
                    );
                }
                grant
            }
            failed => {
                let reason = match failed {
                    Ok(Err(error)) => error.reason,
                    _ => "timeout".to_owned(),
                };
                tracing::warn!(
                    channel = self.channel,
                    budget = self.budget.name,
                    reason,
                    "The shared rate budget did not answer; pacing this replica alone for a while."
                );
                metrics::counter!(BUDGET_FALLBACKS, "channel" => self.channel, "budget" => self.budget.name)
                    .increment(1);
                held.degraded_until = Some(Instant::now() + SHARED_RETRY);
                self.local.take_now(&self.budget, 1)
            }
        }
    }
}

/// The budget layer (see the module docs).
#[derive(Debug)]
pub struct Budgets<C> {
    inner: C,
    gates: Vec<Gate>,
}

impl<C: Channel> Budgets<C> {
    /// Keeps `inner`'s writes within `plan`'s budgets.
    pub fn new(inner: C, plan: BudgetPlan) -> Self {
        let channel = inner.name();
        let gates = plan
            .budgets
            .into_iter()
            .map(|budget| Gate::new(channel, budget, plan.shared.clone()))
            .collect();
        Self { inner, gates }
    }

    /// The wrapped channel.
    pub fn inner(&self) -> &C {
        &self.inner
    }

    fn gates(&self, family: Family) -> impl Iterator<Item = &Gate> {
        self.gates
            .iter()
            .filter(move |gate| family.draws_on(&gate.budget.writes))
    }

    /// Waits for a token of every budget a final of `family` draws on.
    async fn for_final(&self, family: Family) -> ChannelResult {
        for gate in self.gates(family) {
            let waited = gate
                .take(MAX_PAUSE_WAIT)
                .await
                .map_err(ChannelError::OverBudget)?;
            if waited {
                metrics::counter!(BUDGET_WAITS, "channel" => gate.channel, "budget" => gate.budget.name)
                    .increment(1);
            }
        }
        Ok(())
    }

    /// Takes a token of every budget a partial of `family` draws on, if all are free now.
    async fn for_partial(&self, family: Family) -> ChannelResult {
        for gate in self.gates(family) {
            if let Err(wait) = gate.try_take().await {
                metrics::counter!(BUDGET_SKIPS, "channel" => gate.channel, "budget" => gate.budget.name)
                    .increment(1);
                return Err(ChannelError::OverBudget(wait));
            }
        }
        Ok(())
    }
}

#[async_trait]
impl<C: Channel> Channel for Budgets<C> {
    forward_channel!(inner() => identity, name, capabilities, is_connected, exclusive_transport, run, turn_ended,
        react, thread_of, fetch_file);

    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        self.for_final(Family::Messages).await?;
        self.inner.send_text(to, text).await
    }

    async fn start_stream(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        self.for_partial(Family::Messages).await?;
        self.inner.start_stream(to, text).await
    }

    async fn edit_text(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        self.for_partial(Family::Edits).await?;
        self.inner.edit_text(to, id, text).await
    }

    async fn finish_stream(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        self.for_final(Family::Edits).await?;
        self.inner.finish_stream(to, id, text).await
    }

    async fn send_file(&self, to: SendTarget<'_>, file: &OutboundFile) -> ChannelResult {
        self.for_final(Family::Files).await?;
        self.inner.send_file(to, file).await
    }

    async fn show_typing(&self, to: SendTarget<'_>) -> ChannelResult {
        self.for_partial(Family::Typing).await?;
        self.inner.show_typing(to).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::budget::BudgetError;
    use crate::delivery::recorder::{Call, Op, Recorder, layered_with, secs, target, unpaced};

    /// 2 at once, then 10 a second, for `writes`.
    const BOT: RateBudget = RateBudget::per_second("bot", Writes::MESSAGES_EDITS_FILES, 2, 10);

    fn caps(budgets: &'static [RateBudget]) -> Capabilities {
        Capabilities {
            rate_budgets: budgets,
            ..unpaced()
        }
    }

    /// Six writes within [`BOT`]: two at once, then one per 100 ms.
    fn six_paced() -> [Duration; 6] {
        [0.0, 0.0, 0.1, 0.2, 0.3, 0.4].map(secs)
    }

    fn over_budget<T: std::fmt::Debug>(result: ChannelResult<T>) -> Duration {
        match result {
            Err(ChannelError::OverBudget(wait)) => wait,
            other => panic!("expected OverBudget, got {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn finals_wait_for_their_token_and_partials_are_skipped() {
        let (rec, layer) = layered_with(caps(&[BOT]), |r| {
            Budgets::new(r.clone(), BudgetPlan::declared(&r.capabilities()))
        });
        for text in ["a", "b", "c"] {
            layer.send_text(target(), text).await.unwrap();
        }
        // The burst is spent: a partial is refused at once, with the wait, and not sent.
        let wait = over_budget(layer.start_stream(target(), "partial").await);
        assert_eq!(wait, secs(0.1));
        assert_eq!(
            over_budget(layer.edit_text(target(), &MessageId::new("m1"), "p").await),
            secs(0.1)
        );
        layer
            .finish_stream(target(), &MessageId::new("m1"), "d")
            .await
            .unwrap();
        assert_eq!(
            rec.timed(),
            [
                (secs(0.0), Call::Send("a".into())),
                (secs(0.0), Call::Send("b".into())),
                (secs(0.1), Call::Send("c".into())),
                (secs(0.2), Call::Finish("m1".into(), "d".into())),
            ]
        );
        assert_eq!(
            rec.attempts(Op::Start),
            0,
            "the skipped partial never reached the platform"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_finals_are_served_in_call_order_and_never_oversubscribe() {
        let (rec, layer) = layered_with(caps(&[BOT]), |r| {
            Budgets::new(r.clone(), BudgetPlan::declared(&r.capabilities()))
        });
        let texts: Vec<String> = (0..6).map(|i| i.to_string()).collect();
        futures_util::future::join_all(texts.iter().map(|t| layer.send_text(target(), t))).await;
        let times: Vec<_> = rec.timed().into_iter().map(|(at, _)| at).collect();
        assert_eq!(times, six_paced());
        assert_eq!(rec.calls()[2], Call::Send("2".into()), "in call order");
    }

    #[tokio::test(start_paused = true)]
    async fn only_the_families_a_budget_names_draw_on_it() {
        const CARDS: RateBudget = RateBudget::per_second("card_updates", Writes::EDITS, 1, 1);
        const TYPING: RateBudget = RateBudget::per_minute("bot", Writes::ALL, 1, 1);
        let (rec, layer) = layered_with(caps(&[CARDS]), |r| {
            Budgets::new(r.clone(), BudgetPlan::declared(&r.capabilities()))
        });
        for _ in 0..3 {
            layer.send_text(target(), "new").await.unwrap();
            layer.show_typing(target()).await.unwrap();
        }
        layer
            .edit_text(target(), &MessageId::new("m1"), "e")
            .await
            .unwrap();
        over_budget(layer.edit_text(target(), &MessageId::new("m1"), "e2").await);
        assert!(rec.timed().iter().all(|(at, _)| *at == secs(0.0)));

        // The typing hint draws on a budget of every write, and is skipped when short.
        let (rec, layer) = layered_with(caps(&[TYPING]), |r| {
            Budgets::new(r.clone(), BudgetPlan::declared(&r.capabilities()))
        });
        layer.show_typing(target()).await.unwrap();
        over_budget(layer.show_typing(target()).await);
        assert_eq!(rec.calls(), [Call::Typing]);
        // Reading files and ending a turn pass through unpaced.
        layer.turn_ended(target()).await.unwrap();
        assert_eq!(rec.calls().last(), Some(&Call::TurnEnded));
    }

    #[tokio::test(start_paused = true)]
    async fn a_final_that_would_wait_past_the_bound_fails_without_sending() {
        const SLOW: RateBudget = RateBudget {
            name: "bot",
            writes: Writes::ALL,
            burst: 1,
            every: Duration::from_secs(40),
        };
        let (rec, layer) = layered_with(caps(&[SLOW]), |r| {
            Budgets::new(r.clone(), BudgetPlan::declared(&r.capabilities()))
        });
        layer.send_text(target(), "x").await.unwrap();
        let start = Instant::now();
        // "y" waits its 40 s; "z" comes after it and would wait until 80 s, past the bound.
        let (y, z) = tokio::join!(layer.send_text(target(), "y"), async {
            tokio::task::yield_now().await;
            let z = layer.send_text(target(), "z").await;
            (z, start.elapsed())
        });
        y.unwrap();
        let (z, when) = z;
        assert_eq!(over_budget(z), Duration::from_secs(40));
        assert_eq!(when, Duration::from_secs(40), "refused as soon as it knew");
        assert_eq!(
            rec.calls(),
            [Call::Send("x".into()), Call::Send("y".into())]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_skips_updates_while_short_and_shows_the_newest_once_there_is_room() {
        const SLOW: RateBudget = RateBudget::per_second("bot", Writes::ALL, 1, 1);
        let rec = Recorder::new(caps(&[SLOW]));
        let delivery = crate::delivery::Delivery::new(rec.clone());
        let out = crate::delivery::recorder::out;
        delivery.deliver(&out("a", false)).await.unwrap();
        // No token for "ab": it is not sent, and the caller is not held.
        delivery.deliver(&out("ab", false)).await.unwrap();
        tokio::time::sleep(secs(0.5)).await;
        delivery.deliver(&out("abc", false)).await.unwrap();
        tokio::time::sleep(secs(0.7)).await;
        // The final waits for its token.
        delivery.deliver(&out("abcd", true)).await.unwrap();
        assert_eq!(
            rec.timed(),
            [
                (secs(0.0), Call::Start("a".into())),
                (secs(1.0), Call::Edit("m1".into(), "abc".into())),
                (secs(2.0), Call::Finish("m1".into(), "abcd".into())),
            ]
        );
        assert_eq!(
            rec.attempts(Op::Edit),
            1,
            "the skipped update never reached the platform"
        );
    }

    /// A source several replicas share: one bucket, counting the calls made to it, and
    /// failing while `down`.
    #[derive(Debug, Default)]
    struct Shared {
        bucket: LocalBucket,
        calls: AtomicUsize,
        down: std::sync::atomic::AtomicBool,
    }

    #[async_trait]
    impl TokenSource for Shared {
        async fn take(
            &self,
            key: &str,
            budget: &RateBudget,
            want: u32,
        ) -> Result<Grant, BudgetError> {
            assert_eq!(key, "recorder:bot");
            self.calls.fetch_add(1, Ordering::Relaxed);
            if self.down.load(Ordering::Relaxed) {
                return Err(BudgetError {
                    reason: "down".into(),
                });
            }
            Ok(self.bucket.take_now(budget, want))
        }
    }

    fn replica(
        shared: &Arc<Shared>,
        budget: RateBudget,
    ) -> (Arc<Recorder>, Budgets<Arc<Recorder>>) {
        let plan = BudgetPlan {
            budgets: vec![budget],
            shared: Some(shared.clone()),
        };
        layered_with(unpaced(), |r| Budgets::new(r, plan))
    }

    #[tokio::test(start_paused = true)]
    async fn replicas_sharing_a_source_stay_within_one_budget_together() {
        let shared = Arc::new(Shared::default());
        let (a_rec, a) = replica(&shared, BOT);
        let (b_rec, b) = replica(&shared, BOT);
        let send = |layer, text| async move { Budgets::send_text(layer, target(), text).await };
        tokio::join!(
            async {
                for _ in 0..3 {
                    send(&a, "a").await.unwrap();
                }
            },
            async {
                for _ in 0..3 {
                    send(&b, "b").await.unwrap();
                }
            }
        );
        let mut times: Vec<_> = a_rec
            .timed()
            .into_iter()
            .chain(b_rec.timed())
            .map(|(at, _)| at)
            .collect();
        times.sort();
        // Six writes of two replicas: the burst of 2, then one per 100 ms between them.
        assert_eq!(times, six_paced());
    }

    #[tokio::test(start_paused = true)]
    async fn a_shared_source_is_asked_for_a_batch_that_expires_unspent() {
        // 30 a second: what 100 ms earns is 3 tokens, so one call serves three writes.
        const FAST: RateBudget = RateBudget::per_second("bot", Writes::ALL, 20, 30);
        let shared = Arc::new(Shared::default());
        let (rec, layer) = replica(&shared, FAST);
        for _ in 0..6 {
            layer.send_text(target(), "x").await.unwrap();
        }
        assert_eq!(shared.calls.load(Ordering::Relaxed), 2);
        // One token is held; after the batch window it is dropped, not spent late.
        layer.send_text(target(), "y").await.unwrap();
        tokio::time::sleep(BATCH_WINDOW).await;
        layer.send_text(target(), "z").await.unwrap();
        assert_eq!(shared.calls.load(Ordering::Relaxed), 4);
        assert_eq!(rec.calls().len(), 8);
    }

    #[tokio::test(start_paused = true)]
    async fn a_shared_source_that_fails_leaves_the_budget_in_process_for_a_while() {
        let shared = Arc::new(Shared::default());
        shared.down.store(true, Ordering::Relaxed);
        let (rec, layer) = replica(&shared, BOT);
        for _ in 0..3 {
            layer.send_text(target(), "x").await.unwrap();
        }
        // Paced in-process meanwhile, and the source asked once, not per write.
        let times: Vec<_> = rec.timed().into_iter().map(|(at, _)| at).collect();
        assert_eq!(times, [secs(0.0), secs(0.0), secs(0.1)]);
        assert_eq!(shared.calls.load(Ordering::Relaxed), 1);
        shared.down.store(false, Ordering::Relaxed);
        tokio::time::sleep(SHARED_RETRY).await;
        layer.send_text(target(), "y").await.unwrap();
        assert_eq!(
            shared.calls.load(Ordering::Relaxed),
            2,
            "asked again after the pause"
        );
    }
}
