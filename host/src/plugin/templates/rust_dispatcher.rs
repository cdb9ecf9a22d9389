//! `{{name}}`: a crewbox dispatcher. It sends prompts that ask for a review to the
//! `crew` mode (planner, executor, reviewer) and everything else to one agent.

use crewbox_plugin_sdk::{DispatchDecision, DispatchRequest, Dispatcher, Mode, Signal};

struct Route;

impl Dispatcher for Route {
    fn decide(request: DispatchRequest) -> DispatchDecision {
        let wants_review = request.prompt.to_lowercase().contains("review");
        let (mode, reason) = if wants_review && request.available_modes.contains(&Mode::Crew) {
            (Mode::Crew, "review-requested")
        } else {
            (Mode::Single, "default")
        };
        let signals = if wants_review {
            vec![Signal::new("review", "the prompt mentions a review")]
        } else {
            Vec::new()
        };
        DispatchDecision {
            mode,
            reason: reason.into(),
            swarm_size: None,
            tasks: Vec::new(),
            signals,
        }
    }
}

crewbox_plugin_sdk::export_dispatcher!(Route);
