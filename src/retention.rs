//! Bounded state (issue 13): group-topic bindings and reply-chain records nobody touched
//! for `bridge.conversation_ttl_days` are pruned; private-chat bindings (no topic) are kept.
//! The agent's pending questions in groups that expired unanswered go at the same time.
//!
//! One task per daemon prunes once at start and then every [`PRUNE_INTERVAL`]. Pruning is
//! one store call (one statement or transaction per backend); a failed prune is logged and
//! tried again at the next tick. With several replicas on one store each prunes; the calls
//! are idempotent.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::store::{Pruned, Store};

/// The default `bridge.conversation_ttl_days`.
pub const DEFAULT_TTL_DAYS: f64 = 30.0;
/// The default retention, [`DEFAULT_TTL_DAYS`] days.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30 * 86_400);
/// How often the store is pruned: state at most this much older than the TTL survives.
pub const PRUNE_INTERVAL: Duration = Duration::from_secs(3600);

/// Prunes what nobody touched for `ttl`, logging what went.
pub async fn prune_once(store: &dyn Store, ttl: Duration) -> Option<Pruned> {
    match store.prune_conversations(ttl).await {
        Ok(pruned) => {
            if pruned != Pruned::default() {
                tracing::info!(
                    bindings = pruned.bindings,
                    messages = pruned.messages,
                    questions = pruned.questions,
                    "Pruned conversations nobody touched for the retention period, and expired questions."
                );
            }
            Some(pruned)
        }
        Err(error) => {
            tracing::warn!(%error, "Pruning old conversations failed; trying again later.");
            None
        }
    }
}

/// Prunes at start and every `interval` until `shutdown`.
pub async fn run(
    store: Arc<dyn Store>,
    ttl: Duration,
    interval: Duration,
    shutdown: CancellationToken,
) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = ticks.tick() => {}
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = prune_once(store.as_ref(), ttl) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::ThreadId;
    use crate::store::{ConversationKey, SqliteStore};
    use im_bridge_channel::ChatId;

    #[tokio::test]
    async fn issue_13_topic_bindings_and_records_go_private_bindings_stay() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&dir.path().join("s.db")).await.unwrap());
        let topic = ConversationKey::new("tg", ChatId::new("-100"), Some("7".into()));
        let private = ConversationKey::new("tg", ChatId::new("42"), None);
        for key in [&topic, &private] {
            store
                .set_binding(key, &ThreadId::new("t"), "u")
                .await
                .unwrap();
        }
        store.remember_messages(&topic, &["7", "8"]).await.unwrap();
        // Touched just now: a day's retention keeps everything.
        let kept = prune_once(store.as_ref(), Duration::from_secs(86_400)).await;
        assert_eq!(kept, Some(Pruned::default()));
        let gone = prune_once(store.as_ref(), Duration::ZERO).await.unwrap();
        assert_eq!(
            gone,
            Pruned {
                bindings: 1,
                messages: 2,
                questions: 0,
            }
        );
        assert!(store.get_binding(&topic).await.unwrap().is_none());
        assert!(store.get_binding(&private).await.unwrap().is_some());
        // The task prunes at start and stops on shutdown.
        store.remember_messages(&topic, &["9"]).await.unwrap();
        let stop = CancellationToken::new();
        let task = tokio::spawn(run(
            store.clone(),
            Duration::ZERO,
            PRUNE_INTERVAL,
            stop.clone(),
        ));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while store
            .message_conversation("tg", &ChatId::new("-100"), "9")
            .await
            .unwrap()
            .is_some()
        {
            assert!(tokio::time::Instant::now() < deadline, "never pruned");
            tokio::task::yield_now().await;
        }
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap();
        store.close().await.unwrap();
    }
}
