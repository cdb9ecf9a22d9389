//! Scheduled jobs: what a schedule means and when it fires next.
//!
//! This module is pure: it parses and validates schedule specifications
//! ([`spec`]) and computes fire times and missed-run plans ([`next_fire`]) from
//! clocks passed in by the caller. The daemon that stores jobs and fires them
//! builds on top of it.

mod cron_check;
pub mod daemon;
pub mod lock;
pub mod next_fire;
pub mod spec;

pub use next_fire::{CatchUp, Overlap, OverlapAction, plan_fires};
pub use spec::{ScheduleSpec, parse_time_zone, validate_job_name, validate_prompt};
