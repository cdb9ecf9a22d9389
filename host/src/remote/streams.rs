//! The JetStream streams and consumers of scale-out, with every limit explicit: no
//! stream grows without bound, and a full stream refuses new messages (discard `new`)
//! instead of silently dropping old ones a run still needs.
//!
//! - `CREWBOX_TASKS` (`crewbox.task.<pool>.<run>.<key>`): a work queue; a task is
//!   removed once a worker acks it (after its result is durable).
//! - `CREWBOX_RESULTS` (`crewbox.out.<run>.{event,result}.<key>`): events and results
//!   for the coordinator, on file storage, kept for [`RESULTS_MAX_AGE`] so a coordinator
//!   that was down picks them up on `resume`.
//!
//! Only configuration Debian's nats-server 2.9 understands is used.

use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};

use super::RemoteError;

/// The task stream.
pub const TASKS: &str = "CREWBOX_TASKS";
/// The results and events stream.
pub const RESULTS: &str = "CREWBOX_RESULTS";
/// How long an unclaimed task waits for a worker.
pub const TASKS_MAX_AGE: Duration = Duration::from_secs(24 * 3600);
/// How long results and events are kept.
pub const RESULTS_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
/// Deliveries of one task that run it. A later delivery is answered with an error
/// result naming the count instead (each worker that took it stopped before answering:
/// killed, or the task crashes workers), so its run goes on and the agent is a dead
/// letter that `crewbox retry` can run again. The pool consumer of an older crewbox
/// delivers 5 times, so the fifth delivery answers on it too.
pub const RUN_DELIVERIES: i64 = 4;
/// Deliveries of one task in all: those past [`RUN_DELIVERIES`] only answer it, and
/// more than one is allowed, so a worker killed while answering does not leave the
/// task undeliverable (a task JetStream gives up on stays in the work queue, never
/// delivered, and its run would wait for it for ever).
pub const MAX_DELIVER: i64 = 10;
/// A run's consumer goes away after this long without its coordinator.
pub const RUN_CONSUMER_IDLE: Duration = Duration::from_secs(7 * 24 * 3600);

/// The subject of a task.
pub fn task_subject(pool: &str, run: &str, key: &str) -> String {
    format!("crewbox.task.{pool}.{run}.{key}")
}

/// The subject of a task's result.
pub fn result_subject(run: &str, key: &str) -> String {
    format!("crewbox.out.{run}.result.{key}")
}

/// The subject of a task's events.
pub fn event_subject(run: &str, key: &str) -> String {
    format!("crewbox.out.{run}.event.{key}")
}

/// The subject of a steer or stop for a task's agent (core NATS, outside both streams:
/// an order is for the worker running the agent now, not kept for later).
pub fn control_subject(pool: &str, run: &str, key: &str) -> String {
    format!("crewbox.ctl.{pool}.{run}.{key}")
}

/// Every control subject of a pool (what its workers listen on).
pub fn control_filter(pool: &str) -> String {
    format!("crewbox.ctl.{pool}.>")
}

/// Creates both streams if missing (the first coordinator or worker does).
pub async fn ensure(
    js: &jetstream::Context,
) -> Result<(stream::Stream, stream::Stream), RemoteError> {
    let tasks = js
        .get_or_create_stream(stream::Config {
            name: TASKS.into(),
            description: Some("crewbox agent tasks (work queue)".into()),
            subjects: vec!["crewbox.task.>".into()],
            retention: stream::RetentionPolicy::WorkQueue,
            storage: stream::StorageType::File,
            discard: stream::DiscardPolicy::New,
            max_age: TASKS_MAX_AGE,
            max_messages: 1_000_000,
            max_bytes: 1 << 30,
            max_message_size: super::task::MAX_TASK_BYTES as i32,
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        })
        .await
        .map_err(|e| RemoteError::Stream {
            stream: TASKS,
            detail: e.to_string(),
        })?;
    let results = js
        .get_or_create_stream(stream::Config {
            name: RESULTS.into(),
            description: Some("crewbox agent events and results".into()),
            subjects: vec!["crewbox.out.>".into()],
            retention: stream::RetentionPolicy::Limits,
            storage: stream::StorageType::File,
            discard: stream::DiscardPolicy::New,
            max_age: RESULTS_MAX_AGE,
            max_messages: 10_000_000,
            max_bytes: 4 << 30,
            max_message_size: super::task::MAX_RESULT_BYTES as i32,
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        })
        .await
        .map_err(|e| RemoteError::Stream {
            stream: RESULTS,
            detail: e.to_string(),
        })?;
    Ok((tasks, results))
}

/// The durable consumer the workers of `pool` share, and the ack wait it has.
///
/// The first worker of a pool makes it with its `ack_wait`; a later worker gets it as
/// it is, and the server redelivers a task after the *consumer's* ack wait, whatever
/// the worker's own setting: a worker must beat at that pace, so it is returned (a
/// worker beating at its own, longer pace had its tasks redelivered to another worker
/// and run twice). A consumer an older crewbox made allows fewer deliveries than
/// [`MAX_DELIVER`]: it is raised in place (nothing else of it changes).
pub async fn pool_consumer(
    tasks: &stream::Stream,
    pool: &str,
    ack_wait: Duration,
) -> Result<(consumer::PullConsumer, Duration), RemoteError> {
    let name = format!("crewbox-pool-{pool}");
    let fail = |e: String| RemoteError::Stream {
        stream: TASKS,
        detail: format!("consumer {name}: {e}"),
    };
    let mut consumer: consumer::PullConsumer = tasks
        .get_or_create_consumer(
            &name,
            consumer::pull::Config {
                durable_name: Some(name.clone()),
                description: Some(format!("crewbox workers of pool {pool}")),
                filter_subject: format!("crewbox.task.{pool}.>"),
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait,
                max_deliver: MAX_DELIVER,
                max_ack_pending: 10_000,
                ..Default::default()
            },
        )
        .await
        .map_err(|e| fail(e.to_string()))?;
    let found = consumer.cached_info().config.clone();
    if (0..MAX_DELIVER).contains(&found.max_deliver) {
        tracing::info!(
            consumer = %name,
            from = found.max_deliver,
            to = MAX_DELIVER,
            "raising the deliveries of a pool consumer an earlier crewbox made"
        );
        // A create with the durable's name and a changed editable field updates it
        // (nats-server 2.9 and later).
        let raised = consumer::pull::Config {
            max_deliver: MAX_DELIVER,
            ..consumer::FromConsumer::try_from_consumer_config(found)
                .map_err(|e| fail(e.to_string()))?
        };
        consumer = tasks
            .create_consumer(raised)
            .await
            .map_err(|e| fail(format!("raising its deliveries to {MAX_DELIVER}: {e}")))?;
    }
    let theirs = consumer.cached_info().config.ack_wait;
    if theirs != ack_wait {
        tracing::warn!(
            consumer = %name,
            consumer_ack_wait_s = theirs.as_secs_f64(),
            own_ack_wait_s = ack_wait.as_secs_f64(),
            "the pool's consumer has another ack wait than `[nats] ack_wait_s`: it counts \
             (the first worker of the pool set it); tasks are kept alive at its pace"
        );
    }
    Ok((consumer, theirs))
}

/// The durable consumer of one run's events and results (it survives the coordinator,
/// so `resume` reads what arrived meanwhile), and whether it was new: a run's consumer
/// is made before its first task is published, so for a new one no task of the run can
/// be on the server yet.
pub async fn run_consumer(
    results: &stream::Stream,
    run: &str,
) -> Result<(consumer::PullConsumer, bool), RemoteError> {
    let name = format!("crewbox-run-{run}");
    let fail = |e: String| RemoteError::Stream {
        stream: RESULTS,
        detail: format!("consumer {name}: {e}"),
    };
    let config = consumer::pull::Config {
        durable_name: Some(name.clone()),
        description: Some(format!("crewbox coordinator of run {run}")),
        filter_subject: format!("crewbox.out.{run}.>"),
        ack_policy: consumer::AckPolicy::Explicit,
        ack_wait: Duration::from_secs(30),
        max_deliver: -1,
        max_ack_pending: 10_000,
        inactive_threshold: RUN_CONSUMER_IDLE,
        ..Default::default()
    };
    // Only a definite "not found" counts as new: any other failure is not taken as one.
    let new = match results.consumer_info(&name).await {
        Ok(_) => false,
        Err(e) if e.kind() == async_nats::jetstream::context::ConsumerInfoErrorKind::NotFound => {
            true
        }
        Err(e) => return Err(fail(e.to_string())),
    };
    let consumer = if new {
        results
            .create_consumer(config)
            .await
            .map_err(|e| fail(e.to_string()))?
    } else {
        results
            .get_consumer(&name)
            .await
            .map_err(|e| fail(e.to_string()))?
    };
    Ok((consumer, new))
}
