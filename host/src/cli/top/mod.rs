//! `crewbox top`: a live terminal dashboard over the store. It only watches (it never
//! drives a run), so it works beside any `crewbox run`, `resume` or daemon in other
//! processes; its actions go through the same calls as `crewbox steer`, `stop`,
//! `send` and `resume`.
//!
//! The parts: the view model ([`model`], pure), [`source`] (the store, read
//! incrementally through [`crewbox::Watch`]), [`input`] (keys to intents, pure), [`render`] (one frame from
//! the model) and this loop, which redraws only when something changed, on a key, a
//! resize, or once a second for the clocks.

#[cfg(test)]
mod fixtures;
mod input;
mod model;
mod render;
mod source;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use ratatui::crossterm::event::{self, Event as TermEvent, KeyEventKind};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use tokio::sync::mpsc;

use super::{Context, Exit};
use input::{Action, Intent, Ui};
use model::Dashboard;

/// Arguments of `crewbox top`.
#[derive(Debug, Clone, clap::Args)]
pub struct TopArgs {
    /// How often the store is polled, in milliseconds (100..=10000).
    #[arg(long, default_value_t = 500, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(100..=10_000))]
    pub interval: u64,
}

/// Runs the dashboard until `q`, Esc, Ctrl-C, SIGTERM or SIGINT.
pub async fn run(ctx: Context, args: TopArgs, colour: Option<bool>) -> anyhow::Result<Exit> {
    if !crate::text::stdout_is_terminal() || !std::io::stdin().is_terminal() {
        errln!(
            "crewbox: `top` needs a terminal; for programs use `crewbox status --json` or `crewbox events`"
        );
        return Ok(Exit::Usage);
    }
    let colour =
        colour.unwrap_or_else(|| std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()));
    let mut terminal = TerminalGuard::enter()?;
    let result = dashboard(&ctx, &args, colour, &mut terminal).await;
    drop(terminal);
    result
}

async fn dashboard(
    ctx: &Context,
    args: &TopArgs,
    colour: bool,
    terminal: &mut TerminalGuard,
) -> anyhow::Result<Exit> {
    let repo = ctx.root().display().to_string();
    let mut model = Dashboard::default();
    let mut ui = Ui::default();
    let mut source: Option<source::Source> = None;
    let mut problem: Option<String> = None;
    let mut children = Vec::new();
    let (keys, mut key_rx) = mpsc::channel(64);
    let reader = KeyReader::spawn(keys);
    let mut signals = super::signals::Terminate::install();
    let mut tick = tokio::time::interval(Duration::from_millis(args.interval));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut dirty = true;
    let mut drawn_second = 0;
    let exit = loop {
        if dirty || now_ms() / 1000 != drawn_second {
            drawn_second = now_ms() / 1000;
            let view = render::View {
                repo: &repo,
                now: now_ms(),
                colour,
                problem: problem.as_deref(),
            };
            terminal.0.draw(|f| render::draw(f, &model, &ui, &view))?;
            dirty = false;
        }
        tokio::select! {
            _ = signals.recv() => break Exit::Ok,
            key = key_rx.recv() => {
                let Some(key) = key else { break Exit::Ok };
                match key {
                    TermEvent::Key(k) if k.kind != KeyEventKind::Release => {
                        ui.notice = None;
                        match ui.key(k, &mut model) {
                            Intent::Quit => break Exit::Ok,
                            Intent::Redraw => {}
                            Intent::Perform(action) => {
                                ui.notice = Some(match &source {
                                    Some(_) => perform(ctx, action, &mut children).await,
                                    None => "nothing has run here yet".into(),
                                });
                            }
                        }
                        // A new selection is followed at once, not at the next tick.
                        if let Some(s) = source.as_mut()
                            && model.detail_outdated()
                        {
                            s.refresh(&mut model).await?;
                        }
                        dirty = true;
                    }
                    TermEvent::Resize(..) => {
                        terminal.0.autoresize()?;
                        dirty = true;
                    }
                    _ => {}
                }
            }
            _ = tick.tick() => {
                children.retain_mut(|c: &mut std::process::Child| !matches!(c.try_wait(), Ok(Some(_))));
                if source.is_none() {
                    // A fresh state directory: wait for the first run to create the store.
                    match ctx.watch().await {
                        Ok(Some(watch)) => {
                            source = Some(source::Source::new(watch, &mut model).await?);
                            problem = None;
                        }
                        Ok(None) => problem = Some("no store yet: waiting for a first run".into()),
                        Err(e) => problem = Some(e.to_string()),
                    }
                    dirty = true;
                }
                if let Some(s) = source.as_mut() {
                    match s.refresh(&mut model).await {
                        Ok(changed) => {
                            dirty |= changed || problem.take().is_some();
                        }
                        Err(e) => {
                            problem = Some(format!("cannot read the store: {}", super::describe(e.as_ref())));
                            dirty = true;
                        }
                    }
                }
            }
        }
    };
    reader.stop();
    Ok(exit)
}

/// Performs a confirmed action with the calls the matching command uses; what to show.
async fn perform(ctx: &Context, action: Action, children: &mut Vec<std::process::Child>) -> String {
    // The same requests as `crewbox steer`, `stop` and `send`, by full id.
    let queued = match action {
        Action::Steer { agent, message, .. } => ctx.steer(agent.as_str(), &message).await,
        Action::StopAgent { agent, .. } => ctx.stop(agent.as_str()).await,
        Action::StopRun { run } => ctx.stop(run.as_str()).await,
        Action::Send { team, message } => ctx.send_team_message(&team, &message).await,
        Action::Resume { run } => {
            return match resume(ctx, &run) {
                Ok(Ok((child, log))) => {
                    children.push(child);
                    format!(
                        "resuming {run} in a new process; its output: {}",
                        log.display()
                    )
                }
                Ok(Err(refused)) => format!("refused: {refused}"),
                Err(e) => format!("failed: {}", super::describe(e.as_ref())),
            };
        }
    };
    match queued {
        Ok(queued) => queued.sentence,
        Err(e) if e.is_usage() || matches!(e, crewbox::ControlError::Refused(_)) => {
            format!("refused: {e}")
        }
        Err(e) => format!("failed: {}", super::describe(&e)),
    }
}

/// Starts `crewbox resume RUN` for this repository and state base in a process group
/// of its own (a dashboard's Ctrl-C or exit does not end it), its output in a log
/// file in the state directory.
fn resume(
    ctx: &Context,
    run: &crewbox::RunId,
) -> anyhow::Result<Result<(std::process::Child, PathBuf), String>> {
    use anyhow::Context as _;
    let logs = ctx.state_dir().join("logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("cannot create {}", logs.display()))?;
    let log_path = logs.join(format!("resume-{run}.log"));
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("cannot open {}", log_path.display()))?;
    let exe = std::env::current_exe().context("cannot find the crewbox executable")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("--repo").arg(ctx.root());
    if let Some(base) = &ctx.config().state_dir {
        cmd.arg("--state-dir").arg(base);
    }
    cmd.args(["--color", "never", "resume", run.as_str()])
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let child = cmd.spawn().context("cannot start `crewbox resume`")?;
    Ok(Ok((child, log_path)))
}

/// Now, in milliseconds since the Unix epoch (the store's clock).
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The terminal in raw mode on the alternate screen, restored when dropped (also when
/// the dashboard fails or panics).
struct TerminalGuard(ratatui::Terminal<ratatui::backend::CrosstermBackend<std::io::Stdout>>);

// The dashboard draws with terminal controls of its own, so it writes to stdout raw;
// every text it shows passes `crate::text::escape` first (`model::clean`).
#[allow(clippy::disallowed_methods)]
impl TerminalGuard {
    fn enter() -> anyhow::Result<Self> {
        enable_raw_mode()?;
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
        let mut out = std::io::stdout();
        if let Err(e) = execute!(out, EnterAlternateScreen) {
            restore();
            return Err(e.into());
        }
        let mut terminal =
            ratatui::Terminal::new(ratatui::backend::CrosstermBackend::new(std::io::stdout()))?;
        terminal.hide_cursor()?;
        terminal.clear()?;
        Ok(Self(terminal))
    }
}

#[allow(clippy::disallowed_methods)] // see `TerminalGuard`
fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(
        std::io::stdout(),
        LeaveAlternateScreen,
        ratatui::crossterm::cursor::Show
    );
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Reads terminal events on a thread of its own (crossterm's reads block) and hands
/// them to the loop; it checks for a stop between polls.
struct KeyReader {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl KeyReader {
    fn spawn(tx: mpsc::Sender<TermEvent>) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("top-keys".into())
            .spawn(move || {
                while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                    match event::poll(Duration::from_millis(100)) {
                        Ok(true) => match event::read() {
                            Ok(e) => {
                                if tx.blocking_send(e).is_err() {
                                    return;
                                }
                            }
                            Err(_) => return,
                        },
                        Ok(false) => {}
                        Err(_) => return,
                    }
                }
            })
            .ok();
        Self { stop, thread }
    }

    fn stop(self) {
        drop(self);
    }
}

impl Drop for KeyReader {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
