//! Localized replies: picking each reply's locale and publishing finals and partials.
//!
//! The locale chain (DESIGN.md "Locale negotiation"): the chat's own override → the binding
//! owner's language preference from the Gateway (cached) → the sender's platform language
//! → the channel's `locale` → `channel_connections.notification_locale` → `en-US`. Every
//! step matches tags by language; a failing lookup never fails the reply, it falls through.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use im_bridge_channel::{ChatKind, InboundMessage, OutboundMessage};
use tokio::time::Instant;

use crate::bus::{AfterShown, Hooks, Landed, Outbound};
use crate::gateway::{GatewayClient, Owner};
use crate::i18n::{Arg, Catalogs, Locale};
use crate::store::Store;

use super::artifacts::Staged;
use super::journal::{Entry, Final};
use super::typing::{Typing, TypingGuard};
use super::{ManagerConfig, Owners};

/// How long an owner's language preference is reused.
pub const OWNER_LOCALE_TTL: Duration = Duration::from_secs(300);
/// Owners whose preference is cached; at the bound the cache is cleared.
pub const MAX_CACHED_OWNERS: usize = 4096;

/// Which step of the chain chose a locale (shown by `/lang`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocaleSource {
    /// The chat's override, set with `/lang`.
    ChatOverride,
    /// The binding owner's preference on the Gateway.
    Owner,
    /// The sender's platform language.
    Sender,
    /// The channel's `locale` setting.
    Channel,
    /// `channel_connections.notification_locale`.
    Admin,
    /// The built-in default.
    Default,
}

/// Picks locales and publishes localized replies.
pub struct Replier {
    catalogs: Arc<Catalogs>,
    store: Arc<dyn Store>,
    gateway: GatewayClient,
    outbound: Arc<Outbound>,
    channel_locales: HashMap<String, String>,
    notification_locale: String,
    owners: Owners,
    owner_cache: Mutex<HashMap<String, (Instant, Option<Locale>)>>,
    /// The typing hints kept up until a reply is published.
    typing: Typing,
}

impl Replier {
    /// A replier with the manager's locale settings and owners.
    pub fn new(
        catalogs: Arc<Catalogs>,
        store: Arc<dyn Store>,
        gateway: GatewayClient,
        outbound: Arc<Outbound>,
        config: &ManagerConfig,
    ) -> Self {
        Self {
            catalogs,
            store,
            gateway,
            outbound,
            channel_locales: config.channel_locales.clone(),
            notification_locale: config.notification_locale.clone(),
            owners: config.owners.clone(),
            owner_cache: Mutex::new(HashMap::new()),
            typing: Typing::default(),
        }
    }

    /// Keeps "typing…" up for `msg` (sent again every `every`) until a reply to it is
    /// published or the guard drops.
    pub(crate) fn keep_typing(&self, msg: &InboundMessage, every: Duration) -> TypingGuard {
        self.typing.keep(self.outbound.clone(), msg, every)
    }

    /// The catalogs.
    pub fn catalogs(&self) -> &Catalogs {
        &self.catalogs
    }

    /// The outbound router.
    pub fn outbound(&self) -> &Outbound {
        &self.outbound
    }

    /// The locale for replies to `msg`, and which step chose it.
    pub async fn locale_for(&self, msg: &InboundMessage) -> (Locale, LocaleSource) {
        match self
            .store
            .get_chat_locale(&msg.channel_name, &msg.chat_id)
            .await
        {
            Ok(Some(tag)) => {
                if let Some(l) = self.catalogs.negotiate(&tag) {
                    return (l, LocaleSource::ChatOverride);
                }
            }
            Ok(None) => {}
            Err(error) => {
                tracing::debug!(%error, "Reading the chat's language failed; falling through.")
            }
        }
        if let Some(owner) = self.owners.bound_owner_of(msg)
            && let Some(l) = self.owner_locale(owner.as_str()).await
        {
            return (l, LocaleSource::Owner);
        }
        let steps = [
            (msg.locale_hint.as_deref(), LocaleSource::Sender),
            (
                self.channel_locales
                    .get(&msg.channel_name)
                    .map(String::as_str),
                LocaleSource::Channel,
            ),
            (Some(self.notification_locale.as_str()), LocaleSource::Admin),
        ];
        for (tag, source) in steps {
            if let Some(l) = tag.and_then(|t| self.catalogs.negotiate(t)) {
                return (l, source);
            }
        }
        (self.catalogs.default_locale(), LocaleSource::Default)
    }

    async fn owner_locale(&self, owner: &str) -> Option<Locale> {
        let now = Instant::now();
        if let Some((at, cached)) = self
            .owner_cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(owner)
            && now.duration_since(*at) < OWNER_LOCALE_TTL
        {
            return cached.clone();
        }
        let found = match self.gateway.owner_locale(Some(&Owner::new(owner))).await {
            Ok(tag) => tag.and_then(|t| self.catalogs.negotiate(&t)),
            Err(error) => {
                tracing::debug!(%error, "Owner language lookup failed; falling through.");
                None
            }
        };
        let mut cache = self.owner_cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= MAX_CACHED_OWNERS {
            cache.clear();
        }
        cache.insert(owner.to_owned(), (now, found.clone()));
        found
    }

    /// Formats message `id` in `locale`.
    pub fn text(&self, locale: &Locale, id: &str, args: &[(&str, Arg<'_>)]) -> String {
        self.catalogs.text(locale, id, args)
    }

    /// Publishes a final reply to `msg` with message `id`, in the message's locale.
    pub async fn reply(&self, msg: &InboundMessage, id: &str, args: &[(&str, Arg<'_>)]) {
        let out = self.localized(msg, id, args, true).await;
        self.publish(msg, out).await;
    }

    /// A reply to `msg` with message `id` in the message's locale, final or not.
    async fn localized(
        &self,
        msg: &InboundMessage,
        id: &str,
        args: &[(&str, Arg<'_>)],
        is_final: bool,
    ) -> OutboundMessage {
        let (locale, _) = self.locale_for(msg).await;
        msg.reply(self.text(&locale, id, args), is_final)
    }

    /// Whether `msg`'s channel shows a reply's partial updates (edits or a stream), not
    /// only its finals.
    pub fn shows_partials(&self, msg: &InboundMessage) -> bool {
        self.outbound
            .capabilities(&msg.channel_name)
            .is_some_and(|c| c.shows_partial_updates())
    }

    /// Publishes the notice `id` (the message waits, the agent is on it) to `msg`, in the
    /// message's locale: where the channel shows partials, as a partial of the reply, which
    /// the answer then takes the place of; where it shows finals only, as a message of its
    /// own, since a partial would never be seen there.
    pub async fn notice(&self, msg: &InboundMessage, id: &str) {
        let own_message = !self.shows_partials(msg);
        let out = self.localized(msg, id, &[], own_message).await;
        self.publish_with(msg, out, None, Ahead::Not).await;
    }

    /// Publishes a final reply to `msg` with message `id` that comes before the turn's
    /// answer (the goal `/goal from-chat` composed, a new thread replacing a lost one),
    /// like [`Replier::notice`] not written ahead into the turn's journal entry (a restart
    /// that finds finals there takes them for the answer, and a crash before this landed
    /// loses only it).
    pub async fn preamble(&self, msg: &InboundMessage, id: &str, args: &[(&str, Arg<'_>)]) {
        let out = self.localized(msg, id, args, true).await;
        self.publish_with(msg, out, None, Ahead::Not).await;
    }

    /// Publishes, in place of the "waiting" notice partial of `msg`, that its turn came
    /// and the agent is on it. The reply stays last: where the answer before it came
    /// below the notice, the notice is left as it reads and the answer goes on in a new
    /// message under that answer, never above it.
    pub async fn turn_notice(&self, msg: &InboundMessage) {
        let mut out = self
            .localized(msg, crate::i18n::msg::RUN_THINKING, &[], false)
            .await;
        out.hints.stays_last = true;
        self.publish(msg, out).await;
    }

    /// Publishes `out`, a reply to `msg`, without waiting for its chat's write budget (the
    /// delivery lane waits). A group reply's final is remembered together with the message
    /// it answers once it landed (in the store, bounded and pruned), so a later reply to
    /// either continues this conversation (issue 13, reply chains).
    pub async fn publish(&self, msg: &InboundMessage, out: OutboundMessage) {
        self.publish_with(msg, out, None, Ahead::Final(Final::Answer))
            .await;
    }

    /// [`Replier::publish`] for what a hand-off shows of the answer while the run goes on
    /// (`shown`: the part the rest continues from): written ahead as a part, with what it
    /// shows, so a restart delivers it and then follows the run for the rest.
    pub(super) async fn publish_hand_off(
        &self,
        msg: &InboundMessage,
        out: OutboundMessage,
        shown: String,
    ) {
        let ahead = Ahead::Final(Final::HandOff(shown));
        self.publish_with(msg, out, None, ahead).await;
    }

    /// [`Replier::publish`] for a final of `kind` (the answer, or a goal segment the run
    /// goes on after), keeping `staged` (the final's attachment files and their budget
    /// shares) until the reply was delivered.
    pub(super) async fn publish_keeping(
        &self,
        msg: &InboundMessage,
        out: OutboundMessage,
        staged: Option<Staged>,
        kind: Final,
    ) {
        self.publish_with(msg, out, staged, Ahead::Final(kind))
            .await;
    }

    /// [`Replier::publish_keeping`], its final written `ahead` as it says.
    async fn publish_with(
        &self,
        msg: &InboundMessage,
        mut out: OutboundMessage,
        staged: Option<Staged>,
        ahead: Ahead,
    ) {
        self.typing.replied(&out);
        // A journaled turn's replies are tracked until they landed (issue 19).
        let kind = match ahead {
            Ahead::Final(kind) => Some(kind),
            Ahead::Not => None,
        };
        let entry = Entry::current().filter(|_| kind.is_some() || !out.is_final);
        let tracked = match entry {
            Some(entry) => {
                let late = match out.is_final {
                    true => {
                        let (locale, _) = self.locale_for(msg).await;
                        if self.outbound.reply_window(&msg.channel_name).is_some() {
                            // What it opens with if its source takes no more replies by
                            // the time it is delivered, and a later message carries it.
                            let held = self.text(&locale, crate::i18n::msg::RUN_HELD, &[]);
                            out.hints.held_note = Some(held);
                            // What the rest opens with, if the source stops taking
                            // replies after its first messages.
                            let more = [("more", Arg::Str("yes"))];
                            let rest = self.text(&locale, crate::i18n::msg::RUN_REST, &more);
                            out.hints.rest_note = Some(rest);
                        }
                        self.text(&locale, crate::i18n::msg::RUN_RECOVERED, &[])
                    }
                    false => String::new(),
                };
                let kind = kind.unwrap_or(Final::Answer);
                entry.track(&mut out, &late, kind).await
            }
            None => Hooks::default(),
        };
        let chain = (out.is_final && msg.chat_kind == ChatKind::Group).then(|| {
            (
                self.store.clone(),
                super::conversation_key(msg),
                msg.thread_ts.clone(),
            )
        });
        let after = (chain.is_some() || staged.is_some()).then(|| {
            let hook: AfterShown = Box::new(move |shown: Landed| {
                Box::pin(async move {
                    if let Some(staged) = staged {
                        staged.release();
                    }
                    if let Some((store, key, source)) = chain {
                        super::remember_chain(store.as_ref(), &key, source.as_ref(), shown.shown())
                            .await;
                    }
                })
            });
            hook
        });
        let hooks = Hooks {
            before: tracked.before,
            after: both(after, tracked.after),
            gate: tracked.gate,
        };
        self.outbound.publish_hooked(out, hooks).await;
    }
}

/// How a final of a journaled turn is written ahead into the turn's entry before it is
/// published (`journal.rs`).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ahead {
    /// Not at all: it comes before the answer (a notice, a placeholder, the composed
    /// goal). The entry's finals are then the answer alone: a notice written ahead made a
    /// restart deliver the notice, late, and never run the message or follow its run. A
    /// crash before such a reply landed loses only it.
    Not,
    /// As what it is to the answer.
    Final(Final),
}

/// Both hooks, in order.
fn both(first: Option<AfterShown>, second: Option<AfterShown>) -> Option<AfterShown> {
    match (first, second) {
        (Some(first), Some(second)) => Some(Box::new(move |landed: Landed| {
            Box::pin(async move {
                first(landed.clone()).await;
                second(landed).await;
            })
        })),
        (first, second) => first.or(second),
    }
}
