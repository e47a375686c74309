//! The goal state types a thread's values hold (`spec/gateway.md` §4.3): the goal, the
//! evaluator's verdict and the outcome of a met goal. The goal routes (`goal.rs`) and the
//! agent (`agent.rs`) write them; the state only stores them.

use serde::{Deserialize, Serialize};

use crate::wire;

/// A goal as returned by the goal routes and stored in `values.goal`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalState {
    /// The normalised objective.
    pub objective: String,
    /// Always `active` while a goal exists.
    pub status: String,
    /// ISO 8601.
    pub created_at: String,
    /// ISO 8601.
    pub updated_at: String,
    /// Continuations run so far.
    pub continuation_count: u32,
    /// 0..=8.
    pub max_continuations: u32,
    /// Continuations without progress so far.
    pub no_progress_count: u32,
    /// Default 2.
    pub max_no_progress_continuations: u32,
    /// The latest evaluation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_evaluation: Option<GoalEvaluation>,
}

impl GoalState {
    /// A fresh goal.
    pub fn new(objective: impl Into<String>, max_continuations: u32) -> Self {
        let now = wire::now_iso();
        Self {
            objective: objective.into(),
            status: "active".to_owned(),
            created_at: now.clone(),
            updated_at: now,
            continuation_count: 0,
            max_continuations,
            no_progress_count: 0,
            max_no_progress_continuations: 2,
            last_evaluation: None,
        }
    }
}

/// The evaluator's verdict on one turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalEvaluation {
    /// Whether the goal is met.
    pub satisfied: bool,
    /// `none`, `missing_evidence`, `needs_user_input`, `run_failed`, `external_wait` or
    /// `goal_not_met_yet`.
    pub blocker: String,
    /// Free evaluator text (never shown to users).
    pub reason: String,
    /// Free evaluator text (never shown to users).
    pub evidence_summary: String,
    /// \[N\] only.
    pub relied_on_assumption: bool,
    /// The evaluated run.
    pub run_id: String,
    /// ISO 8601.
    pub evaluated_at: String,
    /// A JSON string.
    pub progress_key: String,
    /// Present when auto-continuation stopped, e.g. `max_continuations_reached`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stand_down_reason: Option<String>,
}

/// `values.goal_outcome`, written when a goal is met.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalOutcome {
    /// Always `achieved`.
    pub status: String,
    /// The met objective.
    pub objective: String,
    /// When the goal was set.
    pub goal_created_at: String,
    /// When it was met.
    pub achieved_at: String,
    /// Continuations it took.
    pub continuation_count: u32,
    /// Its limit.
    pub max_continuations: u32,
    /// Free evaluator text (never shown to users).
    pub reason: String,
    /// \[N\] only.
    pub relied_on_assumption: bool,
    /// The AI message that met it.
    pub reply_message_id: Option<String>,
}
