//! A well-behaved dispatcher for the runtime's tests and benchmark.
//!
//! Lines of the prompt starting with `- ` become tasks; two or more tasks make a swarm,
//! otherwise the first available mode is chosen. `print:` and `log:` prefixes make the
//! guest write the rest of the line to stdout or to the host log, so tests can observe
//! both channels.

wit_bindgen::generate!({ path: "../../../wit", world: "dispatcher" });

use crewbox::plugin::log::{Level, log};
use crewbox::plugin::types::{DispatchDecision, DispatchRequest, Mode, Signal};
use exports::crewbox::plugin::dispatch::Guest;

struct Echo;

impl Guest for Echo {
    fn decide(request: DispatchRequest) -> DispatchDecision {
        if let Some(rest) = request.prompt.strip_prefix("print:") {
            println!("{rest}");
        }
        if let Some(rest) = request.prompt.strip_prefix("log:") {
            log(Level::Info, rest);
        }
        let tasks: Vec<String> = request
            .prompt
            .lines()
            .filter_map(|l| l.strip_prefix("- "))
            .map(str::to_owned)
            .collect();
        let (mode, reason) = if tasks.len() >= 2 && request.available_modes.contains(&Mode::Swarm) {
            (Mode::Swarm, "echo-tasks")
        } else {
            (
                request
                    .available_modes
                    .first()
                    .copied()
                    .unwrap_or(Mode::Single),
                "echo-first-mode",
            )
        };
        DispatchDecision {
            mode,
            reason: reason.to_owned(),
            swarm_size: (mode == Mode::Swarm).then_some(tasks.len() as u32),
            signals: vec![Signal {
                name: "length".to_owned(),
                detail: request.prompt.len().to_string(),
            }],
            tasks,
        }
    }
}

export!(Echo);
