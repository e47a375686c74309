//! A run start journaled before its request (issue 27): the entry records the thread it is
//! about to start a run on, and the run carries the entry's id in its `metadata`
//! (`{"im_bridge": {"entry": "<id>"}}`). A process that died after the Gateway accepted the
//! run but before the run id was saved leaves an admitted entry with a thread; recovery
//! lists that thread's runs (`GET …/runs`) and follows the one naming the entry instead of
//! starting another.
//!
//! What the run starts on is recorded too when the Gateway wrote it for the turn: the
//! objective `/goal from-chat` had it compose and save, saved before the turn says so or
//! starts the run. A restart then starts the run on that objective (or follows the run, as
//! above) instead of having the Gateway compose another goal.

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
    /// on recovery looks for it there before starting another. No store write when the
    /// record says so already: admission recorded the conversation's thread when the store
    /// had it in memory (issue 35), and nothing was changed since without being saved (a
    /// change that waits for the next save, a started run's id, also leaves `Admitted`).
    pub(crate) async fn starting(&self, thread: &str) {
        {
            let mut progress = self.progress();
            let record = &mut progress.record;
            if record.state == JournalState::Admitted
                && record.run_id.is_none()
                && record.thread_id.as_deref() == Some(thread)
            {
                return;
            }
            record.state = JournalState::Admitted;
            record.thread_id = Some(thread.to_owned());
            record.run_id = None;
        }
        self.save().await;
    }

    /// Records, saved at once, that the Gateway composed `objective` and saved it as the
    /// goal of `thread`, the thread the turn's run starts on (see the module docs).
    pub(crate) async fn goal_composed(&self, thread: &str, objective: &str) {
        {
            let mut progress = self.progress();
            let record = &mut progress.record;
            record.thread_id = Some(thread.to_owned());
            record.goal_objective = Some(objective.to_owned());
        }
        self.save().await;
    }

    /// The thread and the objective of a goal the Gateway composed for this entry's turn
    /// ([`goal_composed`](Self::goal_composed)).
    pub(crate) fn composed_goal(&self) -> Option<(String, String)> {
        let progress = self.progress();
        let record = &progress.record;
        record.thread_id.clone().zip(record.goal_objective.clone())
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
    use crate::manager::journal::Final;

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

    /// Issue 35: a message whose conversation's binding the store holds in memory is
    /// admitted with that thread, so a run starting there needs no write of its own before
    /// its request; a run on another thread (a `/new` in between) is saved first, and a
    /// conversation the store does not know yet is admitted without a thread.
    #[tokio::test]
    async fn issue_35_the_thread_known_at_admission_spares_the_write_before_the_run() {
        let rig = super::super::retry::tests::rig(std::time::Duration::from_secs(60)).await;
        let unbound = im_bridge_channel::InboundMessage::new("flaky", "7", "u1", "first");
        let super::super::Admission::New {
            entry: Some(first), ..
        } = rig.journal.admit(&unbound, None, true).await
        else {
            panic!("a chat message is journaled");
        };
        assert_eq!(stored(&rig).await.thread_id, None, "no binding, no thread");
        let holder = &rig.journal.shared.holder;
        let removed = rig.store.journal_remove(&first.0.id, holder).await;
        assert!(removed.unwrap());
        let msg = im_bridge_channel::InboundMessage::new("flaky", "4242", "u1", "question");
        let key = crate::store::conversation_key(&msg);
        rig.store
            .set_binding(&key, &crate::gateway::ThreadId::new("t1"), "u1")
            .await
            .unwrap();
        let super::super::Admission::New {
            entry: Some(entry), ..
        } = rig.journal.admit(&msg, None, true).await
        else {
            panic!("a chat message is journaled");
        };
        let mut record = stored(&rig).await;
        assert_eq!(record.state, JournalState::Admitted);
        assert_eq!(
            record.thread_id.as_deref(),
            Some("t1"),
            "admitted with its thread"
        );
        // The stored record is marked behind the entry's back: a save would overwrite it.
        record.attempts = 7;
        let holder = &rig.journal.shared.holder;
        assert!(
            rig.store
                .journal_save(&entry.0.id, &record, holder)
                .await
                .unwrap()
        );
        entry.starting("t1").await;
        assert_eq!(stored(&rig).await.attempts, 7, "no write before the run");
        entry.starting("t2").await;
        let record = stored(&rig).await;
        assert_eq!(record.thread_id.as_deref(), Some("t2"));
        assert_eq!(record.attempts, 0, "saved before a run on another thread");
    }

    #[tokio::test]
    async fn issue_35_a_findable_run_id_goes_with_the_next_save_and_an_unfindable_one_at_once() {
        let rig = super::super::retry::tests::rig(std::time::Duration::from_secs(60)).await;
        let msg = im_bridge_channel::InboundMessage::new("flaky", "4242", "u1", "question");
        let super::super::Admission::New {
            entry: Some(entry), ..
        } = rig.journal.admit(&msg, None, true).await
        else {
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

    #[tokio::test]
    async fn a_composed_goal_is_saved_at_once_with_its_thread() {
        let rig = super::super::retry::tests::rig(std::time::Duration::from_secs(60)).await;
        let msg = im_bridge_channel::InboundMessage::new("flaky", "4242", "u1", "/goal from-chat");
        let super::super::Admission::New {
            entry: Some(entry), ..
        } = rig.journal.admit(&msg, None, true).await
        else {
            panic!("a command that may start a run is journaled");
        };
        assert_eq!(entry.composed_goal(), None);
        entry.goal_composed("t1", "ship the report").await;
        let record = stored(&rig).await;
        assert_eq!(record.thread_id.as_deref(), Some("t1"));
        assert_eq!(record.goal_objective.as_deref(), Some("ship the report"));
        let composed = Some(("t1".to_owned(), "ship the report".to_owned()));
        assert_eq!(entry.composed_goal(), composed);
        // The run about to start there needs no write of its own.
        entry.starting("t1").await;
        assert_eq!(stored(&rig).await, record);
    }

    #[tokio::test]
    async fn every_final_written_ahead_has_a_send_key_of_its_own_that_is_kept() {
        let rig = super::super::retry::tests::rig(std::time::Duration::from_secs(60)).await;
        let msg = im_bridge_channel::InboundMessage::new("flaky", "4242", "u1", "question");
        let super::super::Admission::New {
            entry: Some(entry), ..
        } = rig.journal.admit(&msg, None, true).await
        else {
            panic!("a chat message is journaled");
        };
        let mut first = msg.reply("first part", true);
        let _hooks = entry.track(&mut first, "", Final::Answer).await;
        let mut second = msg.reply("second part", true);
        let _hooks = entry.track(&mut second, "", Final::Answer).await;
        let keys = [&first.hints.send_key, &second.hints.send_key];
        assert!(
            keys.iter().all(|k| k.is_some()) && keys[0] != keys[1],
            "{keys:?}"
        );
        // Written ahead with it: a delivery after a restart names the reply alike.
        let record = stored(&rig).await;
        let saved: Vec<_> = record.finals.iter().map(|f| &f.hints.send_key).collect();
        assert_eq!(saved, keys);
        // A partial has none.
        let mut partial = msg.reply("writing", false);
        let _hooks = entry.track(&mut partial, "", Final::Answer).await;
        assert_eq!(partial.hints.send_key, None);
    }

    #[tokio::test]
    async fn a_stream_that_took_the_place_of_one_left_without_a_final_is_where_recovery_goes_on() {
        let rig = super::super::retry::tests::rig(std::time::Duration::from_secs(60)).await;
        let msg = im_bridge_channel::InboundMessage::new("flaky", "4242", "u1", "question");
        let super::super::Admission::New {
            entry: Some(entry), ..
        } = rig.journal.admit(&msg, None, true).await
        else {
            panic!("a chat message is journaled");
        };
        let saved = |expected: &'static str| {
            let rig = &rig;
            async move {
                let until = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
                while stored(rig).await.stream_message_id.as_deref() != Some(expected) {
                    assert!(tokio::time::Instant::now() < until, "{expected} saved");
                    tokio::task::yield_now().await;
                }
            }
        };
        // The queued notice's message, then, overtaken, a new one below for the answer.
        entry.stream_shown("m1");
        saved("m1").await;
        entry.stream_shown("m3");
        saved("m3").await;
        // A stream after a final is a later reply's: recovery still goes on in m3.
        let mut out = msg.reply("first part", true);
        let _hooks = entry.track(&mut out, "", Final::Answer).await;
        entry.stream_shown("m5");
        entry.save().await;
        assert_eq!(stored(&rig).await.stream_message_id.as_deref(), Some("m3"));
    }
}
