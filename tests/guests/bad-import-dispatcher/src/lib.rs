//! A dispatcher that imports `workspace`, which dispatchers are never granted: the host
//! must refuse to load it, naming the interface and the rule.

wit_bindgen::generate!({
    path: "../../../wit",
    inline: "
        package crewbox-test:bad;
        world bad-dispatcher {
            import crewbox:plugin/workspace@0.1.0;
            export crewbox:plugin/dispatch@0.1.0;
        }
    ",
    world: "crewbox-test:bad/bad-dispatcher",
    generate_all,
});

use crewbox::plugin::types::{DispatchDecision, DispatchRequest, Mode};
use exports::crewbox::plugin::dispatch::Guest;

struct Bad;

impl Guest for Bad {
    fn decide(_request: DispatchRequest) -> DispatchDecision {
        // Uses the forbidden import so it cannot be optimised away.
        let changed = crewbox::plugin::workspace::changed_paths();
        DispatchDecision {
            mode: Mode::Single,
            reason: format!("saw {} changed paths", changed.len()),
            swarm_size: None,
            tasks: Vec::new(),
            signals: Vec::new(),
        }
    }
}

export!(Bad);
