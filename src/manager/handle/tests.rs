//! What a message waiting for its turn holds: its task's future, made and measured, never
//! run.

use std::num::NonZeroUsize;

use im_bridge_channel::inbound_queue;

use super::*;
use crate::bus::Outbound;
use crate::gateway::{GatewayClient, GatewayConfig};
use crate::i18n::Catalogs;
use crate::manager::ManagerConfig;
use crate::store::{SqliteStore, Store};

/// Up to the inbound queue's bound of messages wait at once, each a task of this future:
/// its size must not be the whole turn's, or a saturating load holds tens of megabytes
/// more. Before the stages after the wait were boxed it was 12 KB in a test build (about
/// 20 KB in a release build); since, 4 KB.
#[tokio::test]
async fn a_waiting_message_holds_a_few_kilobytes() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("s.db")).await.unwrap());
    let manager = Manager::new(
        ManagerConfig::default(),
        GatewayClient::new(GatewayConfig::default()).unwrap(),
        store,
        Arc::new(Catalogs::embedded().unwrap()),
        Arc::new(Outbound::new(&[])),
    );
    let (sink, mut queue) = inbound_queue(NonZeroUsize::MIN);
    sink.try_send(InboundMessage::new("console", "4242", "u1", "hello"))
        .unwrap();
    let (msg, room) = queue.recv_held().await.unwrap().into_parts();
    let place = manager.place_in_line(&msg);
    let slot = Slot::queued(room, Arc::new(Semaphore::new(1)));
    let handled = manager.handle(msg, CancellationToken::new(), place, slot, 0, None);
    let size = std::mem::size_of_val(&handled);
    assert!(
        size <= 8 * 1024,
        "a waiting message's task holds {size} bytes"
    );
}
