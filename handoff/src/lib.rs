//! Handoff v2: the typed, bounded result an agent hands back (see DESIGN §5).
