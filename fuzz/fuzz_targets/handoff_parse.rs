//! Feeds arbitrary UTF-8 to the handoff parser: it must answer, never panic or hang.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|reply: &str| {
    if let Ok(h) = crewbox_handoff::parse(reply) {
        // Anything accepted must survive its own canonical form.
        let again = crewbox_handoff::parse_json(&h.to_json()).expect("canonical JSON re-parses");
        assert_eq!(again, h);
    }
    let _ = crewbox_handoff::parse_json(reply);
});
