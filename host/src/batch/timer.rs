//! The thin async shell around [`Debouncer`]: one tokio task owns it, spawns come in
//! over a channel, finalised batches go out over another. The task belongs to the
//! [`Batcher`] handle and is aborted when the handle is dropped.

use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until};

use super::{Batch, DebounceConfig, Debouncer, Spawn};

/// Records a batch before it is released (e.g. writes its groups to the store). An
/// error dissolves the batch: every agent is then delivered individually.
pub type FinalizeHook<P> =
    Box<dyn FnMut(&Batch<P>) -> BoxFuture<'static, Result<(), BatchError>> + Send>;

/// Why a batch could not be finalised as partitioned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("finalising a batch of {agents} agents failed, delivering each individually: {reason}")]
pub struct BatchError {
    /// Agents in the batch.
    pub agents: usize,
    /// What went wrong.
    pub reason: String,
}

/// A batch as released by the [`Batcher`].
#[derive(Clone, Debug, PartialEq)]
pub struct Finalized<P> {
    /// The partitioned batch, or all-individual when `fallback` is set.
    pub batch: Batch<P>,
    /// Set when finalisation failed and the batch was dissolved.
    pub fallback: Option<BatchError>,
}

/// The batcher task is gone (its output receiver was dropped or it was closed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the spawn batcher has stopped")]
pub struct BatcherClosed;

enum Command<P> {
    Spawn(Spawn<P>),
    Flush(oneshot::Sender<()>),
}

/// Handle to the batching task. Dropping it aborts the task; [`Batcher::close`]
/// finalises what is pending first.
pub struct Batcher<P> {
    tx: mpsc::Sender<Command<P>>,
    task: Option<JoinHandle<()>>,
}

impl<P: Send + 'static> Batcher<P> {
    /// Starts a batcher without a finalize hook; batches arrive on the receiver.
    pub fn start(config: DebounceConfig) -> (Self, mpsc::Receiver<Finalized<P>>) {
        Self::start_with_hook(config, Box::new(|_| Box::pin(async { Ok(()) })))
    }

    /// Starts a batcher whose batches pass through `hook` before release.
    pub fn start_with_hook(
        config: DebounceConfig,
        hook: FinalizeHook<P>,
    ) -> (Self, mpsc::Receiver<Finalized<P>>) {
        let (tx, rx) = mpsc::channel(1024);
        let (out_tx, out_rx) = mpsc::channel(64);
        let task = tokio::spawn(run(Debouncer::new(config), rx, out_tx, hook));
        (
            Self {
                tx,
                task: Some(task),
            },
            out_rx,
        )
    }

    /// Queues a spawn for the current batch.
    pub async fn spawn(&self, spawn: Spawn<P>) -> Result<(), BatcherClosed> {
        self.tx
            .send(Command::Spawn(spawn))
            .await
            .map_err(|_| BatcherClosed)
    }

    /// Finalises the pending batch now, without waiting for the debounce. Returns once
    /// the batch is on the output channel. Foreground dispatch calls this before it
    /// awaits its members, so it never waits 100 ms for nothing.
    pub async fn flush(&self) -> Result<(), BatcherClosed> {
        let (ack, done) = oneshot::channel();
        self.tx
            .send(Command::Flush(ack))
            .await
            .map_err(|_| BatcherClosed)?;
        done.await.map_err(|_| BatcherClosed)
    }

    /// Stops taking spawns, finalises what is pending and waits for the task to end.
    pub async fn close(mut self) -> Result<(), BatcherClosed> {
        let task = self.task.take();
        drop(std::mem::replace(&mut self.tx, mpsc::channel(1).0));
        match task {
            Some(t) => t.await.map_err(|_| BatcherClosed),
            None => Ok(()),
        }
    }
}

impl<P> Drop for Batcher<P> {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

async fn run<P>(
    mut debouncer: Debouncer<P>,
    mut rx: mpsc::Receiver<Command<P>>,
    out: mpsc::Sender<Finalized<P>>,
    mut hook: FinalizeHook<P>,
) {
    loop {
        let deadline = debouncer.deadline();
        tokio::select! {
            // The deadline is polled first: a flood of spawns must not starve max-wait.
            biased;
            () = sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                if !release(&mut debouncer, &mut hook, &out).await {
                    return;
                }
            }
            cmd = rx.recv() => match cmd {
                Some(Command::Spawn(spawn)) => {
                    debouncer.push(spawn, Instant::now());
                }
                Some(Command::Flush(ack)) => {
                    if !release(&mut debouncer, &mut hook, &out).await {
                        return;
                    }
                    let _ = ack.send(());
                }
                None => {
                    release(&mut debouncer, &mut hook, &out).await;
                    return;
                }
            },
        }
    }
}

/// Finalises and sends the pending batch; `false` when nobody listens any more.
/// Spawns that arrive meanwhile wait in the channel for the next batch: finalisation
/// never overlaps itself.
async fn release<P>(
    debouncer: &mut Debouncer<P>,
    hook: &mut FinalizeHook<P>,
    out: &mpsc::Sender<Finalized<P>>,
) -> bool {
    if debouncer.is_empty() {
        return !out.is_closed();
    }
    let batch = debouncer.finalize();
    let finalized = match hook(&batch).await {
        Ok(()) => Finalized {
            batch,
            fallback: None,
        },
        Err(e) => {
            tracing::warn!(error = %e, "batch finalisation failed");
            Finalized {
                batch: batch.into_individuals(),
                fallback: Some(e),
            }
        }
    };
    out.send(finalized).await.is_ok()
}
