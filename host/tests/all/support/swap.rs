//! A racing neighbour: a thread that keeps exchanging two paths (a directory and a
//! symlink to somewhere else), as another agent sharing a checkout could.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A thread that swaps two paths with `renameat2(RENAME_EXCHANGE)` until dropped.
pub struct Swapper {
    stop: Arc<AtomicBool>,
    /// How many swaps were made so far.
    pub swaps: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Swapper {
    /// Starts swapping `a` and `b` (both must exist).
    pub fn start(a: PathBuf, b: PathBuf) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicU64::new(0));
        let thread = std::thread::spawn({
            let (stop, swaps) = (stop.clone(), swaps.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    rustix::fs::renameat_with(
                        rustix::fs::CWD,
                        &a,
                        rustix::fs::CWD,
                        &b,
                        rustix::fs::RenameFlags::EXCHANGE,
                    )
                    .expect("renameat2(RENAME_EXCHANGE)");
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        Self {
            stop,
            swaps,
            thread: Some(thread),
        }
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
