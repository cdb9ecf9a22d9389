//! The signals that end a command: SIGTERM and SIGINT mean the same thing everywhere
//! (stop, leave unfinished runs resumable), so a service manager's stop and a Ctrl-C
//! behave alike.

/// Listens for SIGTERM and SIGINT from the moment it is made (so a signal that comes
/// before the first `recv` is not lost).
pub struct Terminate {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
}

impl Terminate {
    /// Installs the handlers; one that cannot be installed is logged and never fires.
    pub fn install() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let install = |kind: SignalKind, name: &str| match signal(kind) {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot install the {name} handler");
                    None
                }
            };
            Self {
                term: install(SignalKind::terminate(), "SIGTERM"),
                int: install(SignalKind::interrupt(), "SIGINT"),
            }
        }
        #[cfg(not(unix))]
        {
            Self {}
        }
    }

    /// Waits for the next SIGTERM or SIGINT.
    pub async fn recv(&mut self) {
        #[cfg(unix)]
        {
            async fn next(s: &mut Option<tokio::signal::unix::Signal>) {
                match s {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            }
            tokio::select! { _ = next(&mut self.term) => {}, _ = next(&mut self.int) => {} }
        }
        #[cfg(not(unix))]
        {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}
