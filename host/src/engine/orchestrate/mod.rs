//! The pure logic of the team modes: assignment parsing, prompts, evaluation and
//! the reflect loop's decisions. No I/O; the engine drives agents around it.

pub mod eval;
pub mod parse;
pub mod prompts;
pub mod reflect;

pub use eval::{
    COMPLETE_SENTINEL, DEFAULT_THRESHOLD, Evaluation, NEEDS_ITERATION_SENTINEL, goal_met,
    has_sentinel, parse_evaluation, parse_score,
};
pub use parse::{Assignments, parse_assignments};
pub use prompts::{
    EarlierReply, PlanningInput, WorkerInfo, WorkerResult, WorkerStatus, broadcast_prompt,
    charter_section, evaluator_prompt, nudge_prompt, planning_prompt, self_evaluation_prompt,
    sequential_prompt, synthesis_prompt, worker_prompt,
};
pub use reflect::{
    ErrorBudget, IterationOutcome, ReflectAction, ReflectConfig, ReflectLoop, StallDetector,
    StallVerdict, Trend, backoff_delay, jaccard, trend,
};
