//! Resources: `crewbox://runs/{run_id}` (a run's report, as `crewbox status RUN
//! --json` prints it) and `crewbox://runs/{run_id}/events` (its first page of events;
//! the `events` tool pages on). Listed for the recent runs; any stored run can be read.

use rmcp::model::{
    ErrorData, ListResourcesResult, PaginatedRequestParams, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};

use super::Server;
use crate::engine::RunReport;

/// The scheme and prefix of every resource.
pub const PREFIX: &str = "crewbox://runs/";
/// How many recent runs are listed.
const LISTED_RUNS: u32 = 50;
/// Events in an events resource.
const EVENTS_PAGE: u32 = 500;

/// The two templates.
pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(format!("{PREFIX}{{run_id}}"), "run report")
            .with_description("A run's report: status, agents, results, branches (JSON).")
            .with_mime_type("application/json"),
        ResourceTemplate::new(format!("{PREFIX}{{run_id}}/events"), "run events")
            .with_description("A run's first 500 stored events, oldest first (JSON).")
            .with_mime_type("application/json"),
    ]
}

fn internal(e: impl std::fmt::Display) -> ErrorData {
    ErrorData::internal_error(crate::redact::clean_owned(e.to_string()), None)
}

/// The resources of the recent runs.
pub async fn list(
    server: &Server,
    _request: Option<PaginatedRequestParams>,
) -> Result<ListResourcesResult, ErrorData> {
    let runs = server
        .engine()
        .store()
        .recent_runs(LISTED_RUNS)
        .await
        .map_err(internal)?;
    let mut out = Vec::with_capacity(runs.len() * 2);
    for r in &runs {
        let prompt: String = r.prompt.chars().take(60).collect();
        out.push(
            Resource::new(format!("{PREFIX}{}", r.id), format!("run {}", r.id))
                .with_description(format!("{} run ({}): {prompt}", r.mode, r.status))
                .with_mime_type("application/json"),
        );
        out.push(
            Resource::new(
                format!("{PREFIX}{}/events", r.id),
                format!("events of run {}", r.id),
            )
            .with_mime_type("application/json"),
        );
    }
    Ok(ListResourcesResult::with_all_items(out))
}

/// What a resource URI names.
#[derive(Debug, PartialEq, Eq)]
enum Uri<'a> {
    Report(&'a str),
    Events(&'a str),
}

fn parse(uri: &str) -> Option<Uri<'_>> {
    let rest = uri.strip_prefix(PREFIX)?;
    let (id, events) = match rest.strip_suffix("/events") {
        Some(id) => (id, true),
        None => (rest, false),
    };
    if id.is_empty() || id.contains('/') {
        return None;
    }
    Some(if events {
        Uri::Events(id)
    } else {
        Uri::Report(id)
    })
}

fn not_found(uri: &str, why: &str) -> ErrorData {
    ErrorData::resource_not_found(
        format!(
            "no resource `{}`: {}",
            crate::text::escape(&super::tools::shown(uri)),
            crate::text::escape(why)
        ),
        None,
    )
}

/// Reads one resource.
pub async fn read(server: &Server, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let Some(what) = parse(uri) else {
        return Err(not_found(
            uri,
            "resources are crewbox://runs/{run_id} and crewbox://runs/{run_id}/events",
        ));
    };
    let store = server.engine().store();
    let id = match what {
        Uri::Report(id) | Uri::Events(id) => id,
    };
    let run = match crate::control::find_run(store, id)
        .await
        .map_err(internal)?
    {
        Ok(run) => run,
        Err(why) => return Err(not_found(uri, &why)),
    };
    let value = match what {
        Uri::Report(_) => {
            let report = RunReport::load(store, run).await.map_err(internal)?;
            super::ops::report_json(store, &report)
                .await
                .map_err(internal)?
        }
        Uri::Events(_) => super::ops::events_page(store, &run.id, 0, EVENTS_PAGE)
            .await
            .map_err(internal)?,
    };
    let text = serde_json::to_string_pretty(&value).map_err(internal)?;
    let contents = ResourceContents::TextResourceContents {
        uri: uri.to_owned(),
        mime_type: Some("application/json".into()),
        text: super::inert(&text),
        meta: None,
    };
    Ok(ReadResourceResult::new(vec![contents]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_name_a_report_or_its_events_and_nothing_else() {
        assert_eq!(parse("crewbox://runs/r-1"), Some(Uri::Report("r-1")));
        assert_eq!(parse("crewbox://runs/r-1/events"), Some(Uri::Events("r-1")));
        assert_eq!(parse("crewbox://runs/"), None);
        assert_eq!(parse("crewbox://runs/a/b"), None);
        assert_eq!(parse("crewbox://runs/../x/events"), None);
        assert_eq!(parse("file:///etc/passwd"), None);
    }
}
