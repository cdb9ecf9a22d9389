//! A slot's pulls: one task at a time, each request answered on one subscription the
//! slot keeps (a subscribe and an unsubscribe per pull cost the server and the client
//! more than the request itself).

use std::time::Duration;

use async_nats::jetstream;
use futures::StreamExt;

/// How long one pull waits on the server for tasks before it is asked again.
pub(super) const PULL_WAIT: Duration = Duration::from_secs(1);

/// A slot's pulls of one task at a time, answered on one subscription the slot keeps
/// (not one per pull): each request is answered once, with a task or with its expiry.
pub(super) struct Puller {
    js: jetstream::Context,
    consumer: jetstream::consumer::PullConsumer,
    /// The slot's inbox and its subscription, made on first use; dropped when a request
    /// went unanswered, so a late answer to it reaches no one (a task answered there is
    /// redelivered once its ack wait is over).
    inbox: Option<(async_nats::Subject, async_nats::Subscriber)>,
}

impl Puller {
    pub(super) fn new(js: jetstream::Context, consumer: jetstream::consumer::PullConsumer) -> Self {
        Self {
            js,
            consumer,
            inbox: None,
        }
    }

    /// The next task, or `None` when the request expired with none.
    pub(super) async fn next(&mut self) -> Result<Option<jetstream::Message>, PullError> {
        let (inbox, sub) = match &mut self.inbox {
            Some(pair) => pair,
            empty => {
                let client = self.js.client();
                let inbox = async_nats::Subject::from(client.new_inbox());
                let sub = client
                    .subscribe(inbox.clone())
                    .await
                    .map_err(|e| PullError(e.to_string()))?;
                empty.insert((inbox, sub))
            }
        };
        let request = jetstream::consumer::pull::BatchConfig {
            batch: 1,
            expires: Some(PULL_WAIT),
            ..Default::default()
        };
        if let Err(e) = self.consumer.request_batch(request, inbox.clone()).await {
            self.inbox = None;
            return Err(PullError(e.to_string()));
        }
        // The server answers by the request's expiry; a wait this much longer means the
        // answer was lost (a reconnect).
        let answer = tokio::time::timeout(PULL_WAIT + Duration::from_secs(5), sub.next()).await;
        let msg = match answer {
            Ok(Some(msg)) => msg,
            Ok(None) => {
                self.inbox = None;
                return Err(PullError("the subscription closed".into()));
            }
            Err(_) => {
                self.inbox = None;
                return Err(PullError("no answer to a pull request".into()));
            }
        };
        match msg.status {
            None | Some(async_nats::StatusCode::OK) => Ok(Some(jetstream::Message {
                context: self.js.clone(),
                message: msg,
            })),
            // Expired (408) with no task, or none waiting (404).
            Some(async_nats::StatusCode::TIMEOUT | async_nats::StatusCode::NOT_FOUND) => Ok(None),
            Some(status) => {
                // 409 and others: the request ended without a task (the consumer was
                // deleted, too many waiting requests): asked again after a backoff.
                let why = msg.description.unwrap_or_default();
                Err(PullError(format!("the server answered {status}: {why}")))
            }
        }
    }
}

/// Why a pull of a task failed (it is tried again).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct PullError(String);
