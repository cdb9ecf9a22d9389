//! Write crewbox plugins in Rust: a dispatcher, validator or crew role is a trait
//! impl plus one export macro.
//!
//! ```ignore
//! use crewbox_plugin_sdk::{AgentOutput, CriterionResult, Validator, ValidatorInfo, Verdict};
//!
//! struct NonEmpty;
//!
//! impl Validator for NonEmpty {
//!     fn describe() -> ValidatorInfo {
//!         ValidatorInfo {
//!             name: "non-empty".into(),
//!             description: "The agent said something.".into(),
//!             default_criteria: vec!["reply-present".into()],
//!         }
//!     }
//!
//!     fn validate(output: AgentOutput, _criteria: Vec<String>) -> Result<Verdict, String> {
//!         let ok = !output.reply.trim().is_empty();
//!         let result = CriterionResult::new("reply-present", ok, "");
//!         Ok(Verdict::from_results(vec![result], None))
//!     }
//! }
//!
//! crewbox_plugin_sdk::export_validator!(NonEmpty);
//! ```
//!
//! Bindings are generated once from the `wit/` package. Each world's export macro
//! embeds only that world's description, and `wit-component` drops imports a
//! component never calls, so a dispatcher built with this SDK imports `log` at most,
//! never `workspace` or `model`.

// The generated export macros expand in the plugin crate and name this crate by its
// path, so the same path must resolve inside the SDK too.
extern crate self as crewbox_plugin_sdk;

#[doc(hidden)]
pub mod __private {
    pub use wit_bindgen;
}

/// Generated bindings; use the re-exports at the crate root instead.
#[doc(hidden)]
pub mod __bindings {
    /// The judge world (a validator that may also ask the model): the superset of
    /// imports, so the shared types and the host interfaces are generated here once.
    /// A validator that never calls [`crate::model`] does not import it.
    pub mod validator {
        wit_bindgen::generate!({
            path: "../../wit",
            world: "judge",
            runtime_path: "crewbox_plugin_sdk::__private::wit_bindgen::rt",
            pub_export_macro: true,
            export_macro_name: "__export_validator_world",
            default_bindings_module: "crewbox_plugin_sdk::__bindings::validator",
            additional_derives: [PartialEq, Eq, Clone],
        });
    }

    /// The dispatcher world, reusing the validator world's types and `log`.
    pub mod dispatcher {
        wit_bindgen::generate!({
            path: "../../wit",
            world: "dispatcher",
            runtime_path: "crewbox_plugin_sdk::__private::wit_bindgen::rt",
            pub_export_macro: true,
            export_macro_name: "__export_dispatcher_world",
            default_bindings_module: "crewbox_plugin_sdk::__bindings::dispatcher",
            with: {
                "crewbox:plugin/types@0.1.0": crewbox_plugin_sdk::__bindings::validator::crewbox::plugin::types,
                "crewbox:plugin/log@0.1.0": crewbox_plugin_sdk::__bindings::validator::crewbox::plugin::log,
            },
        });
    }

    /// The role world, reusing the validator world's types, `log` and `workspace`.
    pub mod role {
        wit_bindgen::generate!({
            path: "../../wit",
            world: "role",
            runtime_path: "crewbox_plugin_sdk::__private::wit_bindgen::rt",
            pub_export_macro: true,
            export_macro_name: "__export_role_world",
            default_bindings_module: "crewbox_plugin_sdk::__bindings::role",
            with: {
                "crewbox:plugin/types@0.1.0": crewbox_plugin_sdk::__bindings::validator::crewbox::plugin::types,
                "crewbox:plugin/log@0.1.0": crewbox_plugin_sdk::__bindings::validator::crewbox::plugin::log,
                "crewbox:plugin/workspace@0.1.0": crewbox_plugin_sdk::__bindings::validator::crewbox::plugin::workspace,
            },
        });
    }
}

mod helpers;
pub mod log;
pub mod model;
pub mod workspace;

pub use __bindings::validator::crewbox::plugin::types::{
    Access, AgentOutput, AgentStatus, CriterionResult, DispatchDecision, DispatchRequest, Mode,
    Outcome, RoleContext, RoleSpec, Signal, ValidatorInfo, Verdict,
};

/// A dispatch heuristic: routes a prompt to an orchestration mode.
///
/// Dispatchers may only log; they never see files or models.
pub trait Dispatcher {
    /// Picks a mode for `request`.
    fn decide(request: DispatchRequest) -> DispatchDecision;
}

/// A validator: judges an agent's output, reading its workspace read-only.
pub trait Validator {
    /// Names the validator and lists the criteria it checks by default.
    fn describe() -> ValidatorInfo;

    /// Checks `output` against `criteria` (empty means the defaults).
    ///
    /// `Err` means the validator could not judge; a failed check is an `Ok` verdict
    /// with `passed: false`.
    fn validate(output: AgentOutput, criteria: Vec<String>) -> Result<Verdict, String>;
}

/// A crew role: describes itself, builds its agent's prompt and reads the reply.
pub trait Role {
    /// Describes the role (name, access, limits).
    fn spec() -> RoleSpec;

    /// Builds the prompt for the agent playing this role.
    fn prompt(context: RoleContext) -> String;

    /// Reads the agent's reply into an outcome.
    fn interpret(context: RoleContext, output: String) -> Outcome;
}

impl<T: Dispatcher> __bindings::dispatcher::exports::crewbox::plugin::dispatch::Guest for T {
    fn decide(request: DispatchRequest) -> DispatchDecision {
        <T as Dispatcher>::decide(request)
    }
}

impl<T: Validator> __bindings::validator::exports::crewbox::plugin::validate::Guest for T {
    fn describe() -> ValidatorInfo {
        <T as Validator>::describe()
    }

    fn validate(output: AgentOutput, criteria: Vec<String>) -> Result<Verdict, String> {
        <T as Validator>::validate(output, criteria)
    }
}

impl<T: Role> __bindings::role::exports::crewbox::plugin::crew_role::Guest for T {
    fn spec() -> RoleSpec {
        <T as Role>::spec()
    }

    fn prompt(context: RoleContext) -> String {
        <T as Role>::prompt(context)
    }

    fn interpret(context: RoleContext, output: String) -> Outcome {
        <T as Role>::interpret(context, output)
    }
}

/// Exports a [`Dispatcher`] impl as this component's `crewbox:plugin/dispatch`.
///
/// Use it once per crate, at the crate root, with a type name. It expands to
/// nothing on native targets, so the crate's logic stays unit-testable and
/// several plugins can be linked into one native binary.
#[macro_export]
macro_rules! export_dispatcher {
    ($ty:ident) => {
        #[cfg(target_arch = "wasm32")]
        $crate::__bindings::dispatcher::__export_dispatcher_world!(
            $ty with_types_in $crate::__bindings::dispatcher
        );
    };
}

/// Exports a [`Validator`] impl as this component's `crewbox:plugin/validate`.
///
/// Use it once per crate, at the crate root, with a type name. It expands to
/// nothing on native targets, so the crate's logic stays unit-testable and
/// several plugins can be linked into one native binary.
#[macro_export]
macro_rules! export_validator {
    ($ty:ident) => {
        #[cfg(target_arch = "wasm32")]
        $crate::__bindings::validator::__export_validator_world!(
            $ty with_types_in $crate::__bindings::validator
        );
    };
}

/// Exports a [`Role`] impl as this component's `crewbox:plugin/crew-role`.
///
/// Use it once per crate, at the crate root, with a type name. It expands to
/// nothing on native targets, so the crate's logic stays unit-testable and
/// several plugins can be linked into one native binary.
#[macro_export]
macro_rules! export_role {
    ($ty:ident) => {
        #[cfg(target_arch = "wasm32")]
        $crate::__bindings::role::__export_role_world!($ty with_types_in $crate::__bindings::role);
    };
}
