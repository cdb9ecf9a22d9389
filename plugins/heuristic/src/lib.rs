//! The built-in `heuristic` dispatcher: routes a prompt to `single`, `swarm` or
//! `crew` from keywords, file paths and numbered steps (pi's heuristic).
//!
//! The rules live in [`decide`], a plain function the host can also call natively
//! as a baseline for benchmarking the component.

mod scan;

use crewbox_plugin_sdk::{DispatchDecision, DispatchRequest, Dispatcher, Mode, Signal};

pub use scan::{Scan, path_tokens, step_lines};

/// Prompts longer than this (in characters) count as long.
pub const LONG_PROMPT_CHARS: usize = 800;

/// Step lines a long prompt needs before it counts as a stepwise implementation.
pub const MIN_STEPS: usize = 3;

/// Distinct paths that make a prompt multi-file.
pub const MIN_PATHS: usize = 2;

/// Why the heuristic picked its mode; printed as a stable code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The prompt asks for a plan or design.
    PlanRequested,
    /// The prompt asks for a review or audit.
    ReviewRequested,
    /// A refactor that also asks for tests.
    RefactorWithTests,
    /// A refactor that touches several files.
    RefactorMultiFile,
    /// An implementation that names several files.
    MultiFileImplementation,
    /// A long implementation request laid out in steps.
    LongStepwiseImplementation,
    /// The prompt asks for parallel or comparative work.
    ParallelRequested,
    /// Nothing pointed anywhere else.
    DefaultSingle,
}

impl Reason {
    /// The stable reason code, e.g. `plan-requested`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PlanRequested => "plan-requested",
            Self::ReviewRequested => "review-requested",
            Self::RefactorWithTests => "refactor-with-tests",
            Self::RefactorMultiFile => "refactor-multi-file",
            Self::MultiFileImplementation => "multi-file-implementation",
            Self::LongStepwiseImplementation => "long-stepwise-implementation",
            Self::ParallelRequested => "parallel-requested",
            Self::DefaultSingle => "default-single",
        }
    }
}

/// The heuristic's answer for one prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The mode to run: `single`, `swarm` or `crew`.
    pub mode: Mode,
    /// Which rule fired.
    pub reason: Reason,
    /// Everything the heuristic noticed, whether or not it decided the mode.
    pub signals: Vec<Signal>,
}

/// Applies the rules to `prompt`; the first matching rule wins.
///
/// plan or review → crew; refactor with tests or several files → crew; an
/// implementation naming several files → crew; a long stepwise implementation →
/// crew; parallel → swarm; otherwise single.
pub fn decide(prompt: &str) -> Decision {
    let scan = Scan::new(prompt);
    let multi_file = scan.paths.len() >= MIN_PATHS;
    let long = scan.chars > LONG_PROMPT_CHARS;
    let stepwise = scan.steps >= MIN_STEPS;

    let (mode, reason) = if scan.plan.is_some() {
        (Mode::Crew, Reason::PlanRequested)
    } else if scan.review.is_some() {
        (Mode::Crew, Reason::ReviewRequested)
    } else if scan.refactor.is_some() && scan.test.is_some() {
        (Mode::Crew, Reason::RefactorWithTests)
    } else if scan.refactor.is_some() && multi_file {
        (Mode::Crew, Reason::RefactorMultiFile)
    } else if scan.implement.is_some() && multi_file {
        (Mode::Crew, Reason::MultiFileImplementation)
    } else if scan.implement.is_some() && long && stepwise {
        (Mode::Crew, Reason::LongStepwiseImplementation)
    } else if scan.parallel.is_some() {
        (Mode::Swarm, Reason::ParallelRequested)
    } else {
        (Mode::Single, Reason::DefaultSingle)
    };

    Decision {
        mode,
        reason,
        signals: scan.signals(),
    }
}

/// The exported component: [`decide`], constrained to the modes the host offers.
pub struct Heuristic;

impl Dispatcher for Heuristic {
    fn decide(request: DispatchRequest) -> DispatchDecision {
        let decision = decide(&request.prompt);
        let mut signals = decision.signals;
        let offered =
            |m: Mode| request.available_modes.is_empty() || request.available_modes.contains(&m);
        let (mode, reason) = if offered(decision.mode) || !offered(Mode::Single) {
            (decision.mode, decision.reason.as_str().to_string())
        } else {
            signals.push(Signal::new(
                "unavailable",
                format!(
                    "{} ({})",
                    mode_name(decision.mode),
                    decision.reason.as_str()
                ),
            ));
            (Mode::Single, "mode-unavailable".to_string())
        };
        DispatchDecision {
            mode,
            reason,
            swarm_size: None,
            tasks: Vec::new(),
            signals,
        }
    }
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Single => "single",
        Mode::Swarm => "swarm",
        Mode::Crew => "crew",
        Mode::Broadcast => "broadcast",
        Mode::Sequential => "sequential",
        Mode::Orchestrate => "orchestrate",
        Mode::Reflect => "reflect",
    }
}

crewbox_plugin_sdk::export_dispatcher!(Heuristic);

#[cfg(test)]
mod tests;
