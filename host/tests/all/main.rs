//! The one integration test binary: the real `crewbox` binary and library against real
//! git repositories, a real SQLite file, real wasmtime with real components, real child
//! processes, and local HTTP servers speaking the providers' wire formats.
//!
//! One binary links once; each former test crate is a module here, and `support` is
//! shared by all of them (including one compiled-plugin cache for the whole suite).

// A test or bench that cannot unwrap fails with the message; product code never does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod agent;
mod agent_wire;
mod audit;
mod boundary;
mod cli;
mod cli_observe;
mod config_ranges;
mod continuity;
mod conversations;
mod criteria_judge;
mod daemon;
mod dead_letters;
mod dispatch_explain;
mod distributed;
mod events_api;
mod exit_codes;
mod kill_anywhere;
mod mcp_client;
mod mcp_serve;
mod modes;
mod non_utf8;
mod operator;
mod packs;
mod plugin_cli;
mod plugin_contract;
mod plugin_hostile;
mod plugin_limits;
mod plugin_names;
mod plugin_precompile;
mod plugin_python;
mod plugin_runtime;
mod plugin_templates;
mod plugin_verdicts;
mod plugin_workspace;
mod provider_anthropic;
mod provider_cli;
mod provider_command;
mod provider_llama;
mod provider_openai;
mod provider_peer;
mod provider_scripted;
mod provider_server_limits;
mod recovery;
mod reflect;
mod reflect_seeds;
mod replay;
mod repository_reads;
mod resume_modes;
mod sandbox;
mod spawn_quotas;
mod spawn_resume;
mod store;
mod teams;
mod telemetry;
mod terminal;
mod tools;
mod trust;
mod tty;
mod worktree;
