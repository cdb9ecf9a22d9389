//! The one `bindgen!` over `wit/`: every world's types and host traits come from here.
//!
//! The three plugin worlds are merged into one synthetic world so a single invocation
//! yields the host traits for every import and the export accessors for every kind;
//! each plugin then loads only the accessor for the export it actually has.

wasmtime::component::bindgen!({
    path: "../wit",
    inline: "
        package crewbox:host;
        world plugins {
            include crewbox:plugin/dispatcher@0.1.0;
            include crewbox:plugin/judge@0.1.0;
            include crewbox:plugin/role@0.1.0;
        }
    ",
    world: "crewbox:host/plugins",
    imports: { default: async },
    exports: { default: async },
    additional_derives: [PartialEq, Eq, serde::Serialize, serde::Deserialize],
});

pub use self::crewbox::plugin::{log, model, types, workspace};
pub use exports::crewbox::plugin::{crew_role, dispatch, validate};
