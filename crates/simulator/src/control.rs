//! The Rust API tests and the demo use to steer and observe the simulator: configuration,
//! scripts and faults, thread and run inspection, the request log, and waiting.
//!
//! Waiting never polls on a timer: every state change and every recorded request bumps a
//! `watch` counter, and a waiter re-checks its condition on each bump until its deadline.

use std::time::Duration;

use serde_json::{Value, json};

use crate::fault::Fault;
use crate::record::RecordedRequest;
use crate::script::Script;
use crate::state::{GoalOutcome, GoalState};
use crate::state::{RunStatus, Thread};
use crate::{Simulator, SimulatorConfig, wire};

/// A wait ran past its deadline.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("simulator condition not met within {after:?}")]
pub struct WaitTimeout {
    /// The deadline that passed.
    pub after: Duration,
}

/// A run, as tests see it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    /// The run id.
    pub run_id: String,
    /// Its thread.
    pub thread_id: String,
    /// Its status now.
    pub status: RunStatus,
    /// The request's `input`, `config`, `context` and `stream_mode`.
    pub kwargs: Value,
}

impl Simulator {
    /// Changes the configuration; takes effect for the next request.
    pub fn configure(&self, change: impl FnOnce(&mut SimulatorConfig)) {
        change(&mut self.state().config);
        self.bump();
    }

    /// A copy of the configuration.
    pub fn config(&self) -> SimulatorConfig {
        self.state().config.clone()
    }

    /// Queues `script` for the next run on `thread_id` (before the global queue).
    pub fn script_thread(&self, thread_id: impl Into<String>, script: Script) {
        self.state()
            .thread_scripts
            .entry(thread_id.into())
            .or_default()
            .push_back(script);
    }

    /// Sets what the agent writes at virtual `path` (e.g. `/mnt/user-data/outputs/report.pdf`)
    /// when a run presents it ([`Script::present_files`]): the run writes it into its user's
    /// area of its thread (its `context.user_id`, else the caller's user), where
    /// `GET …/artifacts/{path}` finds it for calls acting for that user only.
    pub fn put_output(&self, path: impl Into<String>, bytes: impl Into<bytes::Bytes>) {
        let mut state = self.state();
        if state.outputs.len() >= crate::state::MAX_OUTPUTS
            && let Some(old) = state.outputs.keys().next().cloned()
        {
            state.outputs.remove(&old);
        }
        state.outputs.insert(path.into(), bytes.into());
    }

    /// Queues `script` for the next run on any thread without a queued script of its own.
    pub fn script_next_run(&self, script: Script) {
        self.state().next_scripts.push_back(script);
    }

    /// Adds a route fault (see [`Fault`]).
    pub fn push_fault(&self, fault: Fault) {
        self.state().faults.push(fault);
    }

    /// Faults not yet consumed (sticky ones count until cleared). A fault is consumed when a
    /// matching request reaches it, before its delay starts.
    pub fn pending_faults(&self) -> usize {
        self.state().faults.len()
    }

    /// Removes every fault, sticky or not.
    pub fn clear_faults(&self) {
        self.state().faults.clear();
    }

    /// Sets what `GET /api/user-preferences` reports as `settings.locale` for the raw owner
    /// id `owner` (`None`: no locale field, even with a default locale configured).
    pub fn set_user_locale(&self, owner: impl Into<String>, locale: Option<&str>) {
        self.state()
            .locales
            .insert(owner.into(), locale.map(str::to_owned));
    }

    /// Creates thread `thread_id` recorded for the raw owner id `owner` (`None`: shared by
    /// every caller, which no thread made over HTTP is); false if it existed.
    pub fn create_thread(&self, thread_id: &str, owner: Option<&str>) -> bool {
        let created = {
            let mut state = self.state();
            if state.threads.contains_key(thread_id) {
                false
            } else {
                let thread = Thread::new(thread_id, owner.map(str::to_owned));
                state.threads.insert(thread_id.to_owned(), thread);
                true
            }
        };
        self.bump();
        created
    }

    /// Every thread id, sorted.
    pub fn thread_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.state().threads.keys().cloned().collect();
        ids.sort();
        ids
    }

    /// The owner recorded for a thread: the raw owner header it was created with, or
    /// `default` (`None` if shared or unknown).
    pub fn thread_owner(&self, thread_id: &str) -> Option<String> {
        self.state().threads.get(thread_id)?.owner.clone()
    }

    /// The thread's metadata object.
    pub fn thread_metadata(&self, thread_id: &str) -> Option<Value> {
        let state = self.state();
        Some(Value::Object(
            state.threads.get(thread_id)?.metadata.clone(),
        ))
    }

    /// The files uploaded to the thread (by any user), by name and size, oldest first.
    pub fn uploads(&self, thread_id: &str) -> Vec<(String, u64)> {
        self.state().files.uploads(thread_id)
    }

    /// The bytes at virtual `path` (`/mnt/user-data/…`) of `thread_id` in the area of the
    /// user a call with owner header `owner` acts for (`None`: `default`).
    pub fn user_file(
        &self,
        owner: Option<&str>,
        thread_id: &str,
        path: &str,
    ) -> Option<bytes::Bytes> {
        let user = owner.map_or_else(|| wire::DEFAULT_USER.to_owned(), wire::safe_user_id);
        self.state().files.get(&user, thread_id, path)
    }

    /// Sets the memory facts `GET /api/memory` reports to calls with owner header `owner`
    /// (`None`: `default`); other users keep the configured `memory_facts`.
    pub fn set_user_memory(&self, owner: Option<&str>, facts: Vec<String>) {
        let user = owner.map_or_else(|| wire::DEFAULT_USER.to_owned(), wire::safe_user_id);
        self.state().memories.insert(user, facts);
        self.bump();
    }

    /// The thread's channel values, as `/state` would report them.
    pub fn thread_values(&self, thread_id: &str) -> Option<Value> {
        Some(self.state().threads.get(thread_id)?.values())
    }

    /// The thread's history (LangChain message dumps).
    pub fn messages(&self, thread_id: &str) -> Vec<Value> {
        self.state()
            .threads
            .get(thread_id)
            .map(|t| t.messages.to_vec())
            .unwrap_or_default()
    }

    /// Appends a message dump to a thread's history; false if the thread is unknown.
    pub fn append_message(&self, thread_id: &str, message: Value) -> bool {
        let found = match self.state().threads.get_mut(thread_id) {
            Some(thread) => {
                thread.messages.push(message);
                thread.values_written = true;
                thread.touch();
                true
            }
            None => false,
        };
        self.bump();
        found
    }

    /// Holds back the newest `events` of run `run_id`'s record (message rows and
    /// `run.start`s alike) and its receipt, as DeerFlow's are between marking the run
    /// succeeded and flushing the rest of its journal (it writes in batches, so the tail
    /// may end anywhere), or, with `0`, lets it all show again; false if the run is
    /// unknown.
    pub fn hold_run_record(&self, run_id: &str, events: usize) -> bool {
        let found = match self.state().runs.get_mut(run_id) {
            Some(run) => {
                run.record_held = events;
                true
            }
            None => false,
        };
        self.bump();
        found
    }

    /// Keeps only the last `n` messages of a thread's history, as DeerFlow's summarization
    /// or a compaction leaves it (runs keep their own record of what they wrote); false if
    /// the thread is unknown.
    pub fn keep_last_messages(&self, thread_id: &str, n: usize) -> bool {
        let found = match self.state().threads.get_mut(thread_id) {
            Some(thread) => {
                let from = thread.messages.len().saturating_sub(n);
                let kept = thread.messages[from..].to_vec();
                thread.messages = Default::default();
                thread.messages.extend(kept);
                thread.touch();
                true
            }
            None => false,
        };
        self.bump();
        found
    }

    /// Appends a human message (hidden from the UI if `hidden`).
    pub fn append_human_message(&self, thread_id: &str, text: &str, hidden: bool) -> bool {
        let kwargs = if hidden {
            json!({"hide_from_ui": true})
        } else {
            json!({})
        };
        let message = wire::human_message(&wire::new_uuid(), json!(text), kwargs);
        self.append_message(thread_id, message)
    }

    /// The thread's goal.
    pub fn goal(&self, thread_id: &str) -> Option<GoalState> {
        self.state().threads.get(thread_id)?.goal.clone()
    }

    /// Sets or clears a thread's goal (creating a shared thread if needed), without
    /// touching `goal_outcome` or the revision that from-chat checks.
    pub fn set_goal(&self, thread_id: &str, goal: Option<GoalState>) {
        {
            let mut state = self.state();
            let thread = state
                .threads
                .entry(thread_id.to_owned())
                .or_insert_with(|| Thread::new(thread_id, None));
            thread.goal = goal;
            thread.goal_touched = true;
            thread.touch();
        }
        self.bump();
    }

    /// The thread's `goal_outcome`.
    pub fn goal_outcome(&self, thread_id: &str) -> Option<GoalOutcome> {
        self.state().threads.get(thread_id)?.goal_outcome.clone()
    }

    /// The retained runs of a thread, oldest first.
    pub fn runs(&self, thread_id: &str) -> Vec<RunInfo> {
        let state = self.state();
        let mut runs: Vec<_> = state
            .runs
            .values()
            .filter(|r| r.thread_id == thread_id)
            .collect();
        runs.sort_by_key(|r| r.order);
        runs.into_iter().map(run_info).collect()
    }

    /// One run.
    pub fn run(&self, run_id: &str) -> Option<RunInfo> {
        self.state().runs.get(run_id).map(run_info)
    }

    /// Ids of the thread's runs in progress.
    pub fn active_runs(&self, thread_id: &str) -> Vec<String> {
        self.state()
            .threads
            .get(thread_id)
            .map(|t| t.active_runs.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Ends a run held with [`Hold::UntilFinished`](crate::Hold::UntilFinished) (it then
    /// finishes normally), or lets one waiting after a chunk
    /// ([`Script::wait_after_chunk`](crate::Script::wait_after_chunk)) go on. False if no
    /// such run is active.
    pub fn finish_run(&self, run_id: &str) -> bool {
        match self.state().runs.get(run_id) {
            Some(run) if run.status.is_active() => {
                run.finish.notify_one();
                true
            }
            _ => false,
        }
    }

    /// Forgets every run of `thread_id`, as a Gateway restarted without a persistent run
    /// store does (`RunManager.get` finds only its in-memory runs and answers 404; with a
    /// store it would hydrate the record instead): a running one stops where it is, and
    /// each answers 404 from then on.
    pub fn forget_runs(&self, thread_id: &str) {
        {
            let mut state = self.state();
            let runs = state.runs.values().filter(|r| r.thread_id == thread_id);
            let ids: Vec<String> = runs.map(|r| r.run_id.clone()).collect();
            for id in ids {
                if let Some(run) = state.runs.remove(&id) {
                    run.cancel.cancel();
                }
            }
        }
        self.bump();
    }

    /// The retained requests, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.recorder().all().cloned().collect()
    }

    /// The retained requests that match `predicate`.
    pub fn requests_matching(
        &self,
        predicate: impl Fn(&RecordedRequest) -> bool,
    ) -> Vec<RecordedRequest> {
        self.recorder()
            .all()
            .filter(|r| predicate(r))
            .cloned()
            .collect()
    }

    /// Forgets the retained requests.
    pub fn clear_requests(&self) {
        self.recorder().clear();
    }

    /// Waits until at least `count` retained requests match `predicate`, and returns them.
    pub async fn wait_for_requests(
        &self,
        count: usize,
        timeout: Duration,
        predicate: impl Fn(&RecordedRequest) -> bool,
    ) -> Result<Vec<RecordedRequest>, WaitTimeout> {
        let mut found = Vec::new();
        self.wait_until(timeout, |sim| {
            found = sim.requests_matching(&predicate);
            found.len() >= count
        })
        .await?;
        Ok(found)
    }

    /// Waits until `condition` holds; it is checked now and after every change.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        mut condition: impl FnMut(&Simulator) -> bool,
    ) -> Result<(), WaitTimeout> {
        let mut changes = self.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            changes.borrow_and_update();
            if condition(self) {
                return Ok(());
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                // The sender lives in `self`, so it cannot be gone; treat it as a timeout.
                Ok(Err(_)) | Err(_) => return Err(WaitTimeout { after: timeout }),
            }
        }
    }

    /// Waits until the thread has no run in progress.
    pub async fn wait_idle(&self, thread_id: &str, timeout: Duration) -> Result<(), WaitTimeout> {
        self.wait_until(timeout, |sim| sim.active_runs(thread_id).is_empty())
            .await
    }
}

fn run_info(run: &crate::state::RunEntry) -> RunInfo {
    RunInfo {
        run_id: run.run_id.clone(),
        thread_id: run.thread_id.clone(),
        status: run.status,
        kwargs: run.kwargs.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waits_see_changes_made_after_they_start() {
        let sim = Simulator::default();
        let other = sim.clone();
        let waiter = tokio::spawn(async move {
            other
                .wait_until(Duration::from_secs(5), |s| s.goal("t").is_some())
                .await
        });
        tokio::task::yield_now().await;
        sim.set_goal("t", Some(GoalState::new("x", 8)));
        assert_eq!(waiter.await.unwrap(), Ok(()));
    }

    #[tokio::test]
    async fn waits_time_out() {
        let sim = Simulator::default();
        let result = sim
            .wait_until(Duration::from_millis(20), |s| s.goal("t").is_some())
            .await;
        assert_eq!(
            result,
            Err(WaitTimeout {
                after: Duration::from_millis(20)
            })
        );
    }

    #[test]
    fn scripts_are_taken_thread_queue_first() {
        let sim = Simulator::default();
        sim.script_next_run(Script::with_answer("global"));
        sim.script_thread("t", Script::with_answer("mine"));
        let mut state = sim.state();
        assert_eq!(state.take_script("t").answer.as_deref(), Some("mine"));
        assert_eq!(state.take_script("t").answer.as_deref(), Some("global"));
        assert_eq!(state.take_script("t").answer, None);
    }
}
