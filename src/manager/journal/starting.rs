//! A run start journaled before its request (issue 27): the entry records the thread it is
//! about to start a run on, and the run carries the entry's id in its `metadata`
//! (`{"im_bridge": {"entry": "<id>"}}`). A process that died after the Gateway accepted the
//! run but before the run id was saved leaves an admitted entry with a thread; recovery
//! lists that thread's runs (`GET …/runs`) and follows the one naming the entry instead of
//! starting another.

use serde_json::{Value, json};

use super::Entry;
use crate::gateway::RunRequest;
use crate::store::JournalState;

/// The run `metadata` key the bridge's runs carry.
const METADATA_KEY: &str = "im_bridge";

impl Entry {
    /// Puts this entry's key into `request`'s `metadata`, keeping what is there.
    pub(crate) fn mark(&self, request: &mut RunRequest) {
        let metadata = request
            .metadata
            .get_or_insert_with(|| Value::Object(Default::default()));
        mark(metadata, &self.0.id);
    }

    /// Whether a run's `metadata` names this entry.
    pub(crate) fn marked(&self, metadata: &Value) -> bool {
        names(metadata, &self.0.id)
    }

    /// Records, before the run request, that a run is about to start on `thread`: from here
    /// on recovery looks for it there before starting another.
    pub(crate) async fn starting(&self, thread: &str) {
        {
            let mut progress = self.progress();
            progress.record.state = JournalState::Admitted;
            progress.record.thread_id = Some(thread.to_owned());
            progress.record.run_id = None;
        }
        self.save().await;
    }

    /// The thread a run may have been started on without its id being saved: set on an
    /// admitted entry only by [`starting`](Self::starting).
    pub(crate) fn maybe_started_on(&self) -> Option<String> {
        let progress = self.progress();
        let record = &progress.record;
        (record.state == JournalState::Admitted)
            .then(|| record.thread_id.clone())
            .flatten()
    }
}

/// Adds `{"im_bridge": {"entry": id}}` to a metadata object (anything else is left alone).
fn mark(metadata: &mut Value, id: &str) {
    if let Value::Object(map) = metadata {
        map.insert(METADATA_KEY.into(), json!({ "entry": id }));
    }
}

/// Whether `metadata` carries entry `id`'s key.
fn names(metadata: &Value, id: &str) -> bool {
    metadata
        .get(METADATA_KEY)
        .and_then(|m| m.get("entry"))
        .and_then(Value::as_str)
        == Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_27_the_entry_key_joins_the_origin_and_is_recognised() {
        let mut metadata = json!({"deerflow_origin": {"kind": "im_channel"}});
        mark(&mut metadata, "e1");
        assert_eq!(metadata["deerflow_origin"]["kind"], "im_channel");
        assert!(names(&metadata, "e1"));
        assert!(!names(&metadata, "e2"));
        assert!(!names(&json!({}), "e1"));
        assert!(!names(&Value::Null, "e1"));
        assert!(!names(&json!({"im_bridge": {"entry": 1}}), "1"));
    }

    /// The stored record of the journal's only entry.
    async fn stored(rig: &super::super::retry::tests::Rig) -> crate::store::JournalRecord {
        let listed = rig.store.journal_list(0, 10).await.unwrap();
        assert_eq!(listed.len(), 1, "{listed:?}");
        listed.into_iter().next().unwrap().record
    }

    #[tokio::test]
    async fn issue_35_a_findable_run_id_goes_with_the_next_save_and_an_unfindable_one_at_once() {
        let rig = super::super::retry::tests::rig(std::time::Duration::from_secs(60)).await;
        let msg = im_bridge_channel::InboundMessage::new("flaky", "4242", "u1", "question");
        let super::super::Admission::New(Some(entry)) = rig.journal.admit(&msg, None).await else {
            panic!("a chat message is journaled");
        };
        entry.starting("t1").await;
        // The Gateway lists runs: the stored record still says a run may have started on
        // t1, which recovery looks up by the entry key, and the id waits for the next save.
        entry.run_started("t1", "r1", true).await;
        let record = stored(&rig).await;
        assert_eq!(record.state, JournalState::Admitted);
        assert_eq!(record.thread_id.as_deref(), Some("t1"));
        assert_eq!(record.run_id, None);
        assert_eq!(entry.maybe_started_on(), None, "this process knows the run");
        entry.stream_shown("m1");
        let until = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while stored(&rig).await.run_id.is_none() {
            assert!(
                tokio::time::Instant::now() < until,
                "the next save carries the id"
            );
            tokio::task::yield_now().await;
        }
        let record = stored(&rig).await;
        assert_eq!(record.state, JournalState::Running);
        assert_eq!(record.run_id.as_deref(), Some("r1"));
        assert_eq!(record.stream_message_id.as_deref(), Some("m1"));
        // A Gateway that cannot list runs (or not known to): the id is saved at once.
        entry.starting("t2").await;
        entry.run_started("t2", "r2", false).await;
        let record = stored(&rig).await;
        assert_eq!(record.state, JournalState::Running);
        assert_eq!(record.run_id.as_deref(), Some("r2"));
    }
}
