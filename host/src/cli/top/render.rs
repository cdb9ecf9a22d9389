//! Drawing the dashboard from the model: one frame, no state of its own. ratatui
//! diffs each frame against the last, so only changed cells reach the terminal.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, List, ListItem, ListState, Paragraph, Wrap};

use super::input::{Focus, Modal, Typing, Ui};
use super::model::{Activity, Dashboard, RunDetail, clean};
use crewbox::types::{AgentRow, AgentState, RunRow};
use crewbox::{RunStatus, Trend};

use crate::cli::render::fit;

/// What a frame needs besides the model.
pub struct View<'a> {
    /// The repository shown.
    pub repo: &'a str,
    /// Now (ms since the epoch), for elapsed times.
    pub now: i64,
    /// Whether colours are used (`--color`, `NO_COLOR`).
    pub colour: bool,
    /// Why the store cannot be read, if it cannot.
    pub problem: Option<&'a str>,
}

struct Theme {
    colour: bool,
}

impl Theme {
    fn fg(&self, c: Color) -> Style {
        if self.colour {
            Style::new().fg(c)
        } else {
            Style::new()
        }
    }

    fn selected(&self, focused: bool) -> Style {
        let s = Style::new().add_modifier(Modifier::REVERSED);
        if focused {
            s.add_modifier(Modifier::BOLD)
        } else {
            s
        }
    }

    fn agent(&self, state: AgentState) -> Style {
        self.fg(match state {
            AgentState::Queued => Color::DarkGray,
            AgentState::Running => Color::Cyan,
            AgentState::Completed => Color::Green,
            AgentState::Steered => Color::Yellow,
            AgentState::Stopped | AgentState::Aborted => Color::Magenta,
            AgentState::Error => Color::Red,
        })
    }

    fn run(&self, row: &RunRow) -> Style {
        if row.is_interrupted() {
            return self.fg(Color::Yellow);
        }
        self.fg(match row.status {
            RunStatus::Running => Color::Cyan,
            RunStatus::Completed => Color::Green,
            RunStatus::Failed | RunStatus::Diverged => Color::Red,
            RunStatus::Cancelled => Color::Magenta,
        })
    }
}

/// Draws one frame.
pub fn draw(frame: &mut Frame<'_>, model: &Dashboard, ui: &Ui, view: &View<'_>) {
    let theme = Theme {
        colour: view.colour,
    };
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(6),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let h = &model.health;
    let mut head = format!(
        " crewbox top · {} · agents {} running, {} queued · runs {} unfinished, {} interrupted",
        view.repo, h.running_agents, h.queued_agents, h.unfinished, h.interrupted
    );
    if let Some(p) = view.problem {
        head.push_str(" · ");
        head.push_str(p);
    }
    frame.render_widget(
        Paragraph::new(head).style(Style::new().add_modifier(Modifier::BOLD)),
        header,
    );
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(42), Constraint::Percentage(58)]).areas(body);
    let [runs_area, sched_area] =
        Layout::vertical([Constraint::Min(5), Constraint::Length(8)]).areas(left);
    draw_runs(frame, runs_area, model, ui, view, &theme);
    draw_schedules(frame, sched_area, model, view, &theme);
    draw_detail(frame, right, model, ui, view, &theme);
    let keys = match &ui.notice {
        Some(n) => format!(" {n}"),
        None => {
            " ↑↓ move · Tab pane · s steer · x stop · m message team · r resume · ? help · q quit"
                .to_owned()
        }
    };
    frame.render_widget(
        Paragraph::new(keys).style(theme.fg(Color::DarkGray)),
        footer,
    );
    draw_modal(frame, &ui.modal);
}

fn block(title: &str, focused: bool) -> Block<'_> {
    let b = Block::new().borders(Borders::ALL).title(title);
    if focused {
        b.border_style(Style::new().add_modifier(Modifier::BOLD))
    } else {
        b
    }
}

fn draw_runs(
    frame: &mut Frame<'_>,
    area: Rect,
    model: &Dashboard,
    ui: &Ui,
    view: &View<'_>,
    theme: &Theme,
) {
    let items: Vec<ListItem<'_>> = model
        .runs
        .iter()
        .map(|r| {
            let state = if r.is_interrupted() {
                "interrupted"
            } else {
                r.status.as_str()
            };
            let team = r.team.as_deref().map(clean).unwrap_or_default();
            ListItem::new(Line::from(vec![
                Span::raw(format!("{} ", short(r.id.as_str()))),
                Span::styled(format!("{state:<11} "), theme.run(r)),
                Span::raw(format!(
                    "{:<11} {:<8} {:>6} {:>7}{}",
                    r.mode.as_str(),
                    fit(&team, 8),
                    elapsed(r.created_at, r.finished_at, view.now),
                    tokens(r.tokens.0 + r.tokens.1),
                    r.cost.map(|c| format!(" ${c:.2}")).unwrap_or_default(),
                )),
            ]))
        })
        .collect();
    let title = format!(" Runs ({}) ", model.runs.len());
    let list = List::new(items)
        .block(block(&title, ui.focus == Focus::Runs))
        .highlight_style(theme.selected(ui.focus == Focus::Runs));
    let mut state =
        ListState::default().with_selected((!model.runs.is_empty()).then_some(model.selected));
    frame.render_stateful_widget(list, area, &mut state);
}

fn draw_schedules(
    frame: &mut Frame<'_>,
    area: Rect,
    model: &Dashboard,
    view: &View<'_>,
    theme: &Theme,
) {
    let mut lines: Vec<Line<'_>> = model
        .schedules
        .iter()
        .map(|j| {
            let next = match (j.paused, j.next_fire) {
                (true, _) => "paused".to_owned(),
                (false, Some(t)) => format!("in {}", duration((t - view.now).max(0))),
                (false, None) => "done".to_owned(),
            };
            let mut spans = vec![Span::raw(format!(
                "{:<14} {:<8} {:<12} runs {:<3} ",
                fit(&clean(&j.name), 14),
                j.kind.as_str(),
                next,
                j.run_count
            ))];
            if let Some(e) = &j.last_error {
                spans.push(Span::styled(
                    format!("error: {}", clean(e)),
                    theme.fg(Color::Red),
                ));
            }
            Line::from(spans)
        })
        .collect();
    if lines.is_empty() {
        lines.push(Line::raw("no scheduled jobs"));
    }
    lines.push(Line::styled(
        format!("store {} KiB", model.health.store_bytes / 1024),
        theme.fg(Color::DarkGray),
    ));
    frame.render_widget(
        Paragraph::new(lines).block(block(" Schedules & health ", false)),
        area,
    );
}

fn draw_detail(
    frame: &mut Frame<'_>,
    area: Rect,
    model: &Dashboard,
    ui: &Ui,
    view: &View<'_>,
    theme: &Theme,
) {
    let (Some(run), Some(d)) = (
        model.selected_run(),
        model
            .detail
            .as_ref()
            .filter(|d| Some(&d.run_id) == model.selected_run().map(|r| &r.id)),
    ) else {
        frame.render_widget(
            Paragraph::new(if model.runs.is_empty() {
                "No runs yet. Start one with `crewbox run \"...\"`; it appears here."
            } else {
                "loading…"
            })
            .block(block(" Run ", false)),
            area,
        );
        return;
    };
    let reflect = !d.iterations.is_empty();
    let [head, tree, iters, activity, tail] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Min(4),
        Constraint::Length(if reflect { 4 } else { 0 }),
        Constraint::Length(8),
        Constraint::Length(10),
    ])
    .areas(area);
    let phase = model.phase().map(|p| p.label()).unwrap_or_default();
    let head_lines = vec![
        Line::from(vec![
            Span::styled(
                format!("{} ", run.id),
                Style::new().add_modifier(Modifier::BOLD),
            ),
            Span::raw(format!(
                "· {}{}",
                run.mode.as_str(),
                run.team
                    .as_deref()
                    .map(|t| format!(" · team {}", clean(t)))
                    .unwrap_or_default()
            )),
        ]),
        Line::from(vec![
            Span::styled(phase, theme.run(run)),
            Span::raw(format!(
                " · elapsed {} · agents {} ({} live) · tokens {} in / {} out{}",
                elapsed(run.created_at, run.finished_at, view.now),
                d.agents.len(),
                d.live_agents(),
                tokens(run.tokens.0),
                tokens(run.tokens.1),
                run.cost.map(|c| format!(" · ${c:.4}")).unwrap_or_default()
            )),
        ]),
        Line::styled(clean(&run.prompt), theme.fg(Color::DarkGray)),
    ];
    frame.render_widget(
        Paragraph::new(head_lines).block(Block::new().borders(Borders::TOP).title(" Run ")),
        head,
    );
    draw_tree(frame, tree, d, ui, view, theme);
    if reflect {
        draw_iterations(frame, iters, d, theme);
    }
    draw_activity(frame, activity, d, theme);
    let height = tail.height.saturating_sub(2) as usize;
    let lines: Vec<Line<'_>> = d
        .tail
        .iter()
        .skip(d.tail.len().saturating_sub(height))
        .map(|t| {
            Line::from(vec![
                Span::styled(format!("{:>6} ", t.seq), theme.fg(Color::DarkGray)),
                Span::styled(
                    format!(
                        "{:<12} ",
                        fit(
                            &t.agent
                                .as_ref()
                                .map_or_else(|| "run".into(), |a| clean(&d.name_of(a))),
                            12
                        )
                    ),
                    theme.fg(Color::Blue),
                ),
                Span::raw(t.text.clone()),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines).block(block(" Events ", false)), tail);
}

fn draw_tree(
    frame: &mut Frame<'_>,
    area: Rect,
    d: &RunDetail,
    ui: &Ui,
    view: &View<'_>,
    theme: &Theme,
) {
    let items: Vec<ListItem<'_>> = d
        .tree
        .iter()
        .map(|&(i, depth)| agent_line(&d.agents[i], depth, view, theme))
        .collect();
    let list = List::new(items)
        .block(block(" Agents ", ui.focus == Focus::Agents))
        .highlight_style(theme.selected(ui.focus == Focus::Agents));
    let mut state = ListState::default()
        .with_selected((ui.focus == Focus::Agents && !d.tree.is_empty()).then_some(d.selected));
    frame.render_stateful_widget(list, area, &mut state);
}

fn agent_line<'a>(a: &AgentRow, depth: usize, view: &View<'_>, theme: &Theme) -> ListItem<'a> {
    let indent = "  ".repeat(depth.min(12));
    let branch = if depth > 0 { "└ " } else { "" };
    let mut spans = vec![
        Span::raw(format!("{indent}{branch}")),
        Span::styled(
            format!("{} ", clean(&a.name)),
            Style::new().add_modifier(Modifier::BOLD),
        ),
        Span::raw(format!("({}) ", clean(&a.role))),
        Span::styled(format!("{:<9} ", a.state.as_str()), theme.agent(a.state)),
        Span::raw(format!(
            "{} · turns {} · tools {} · {} tok · {}",
            short(a.id.as_str()),
            a.stats.turns,
            a.stats.tool_calls,
            tokens(a.stats.tokens_in + a.stats.tokens_out),
            match a.started_at {
                Some(start) => elapsed(start, a.finished_at, view.now),
                None => "-".into(),
            }
        )),
    ];
    if let Some(e) = &a.error {
        spans.push(Span::styled(format!(" {}", clean(e)), theme.fg(Color::Red)));
    }
    ListItem::new(Line::from(spans))
}

fn draw_iterations(frame: &mut Frame<'_>, area: Rect, d: &RunDetail, theme: &Theme) {
    let mut spans: Vec<Span<'_>> = Vec::new();
    for it in &d.iterations {
        let score = it
            .score
            .map_or_else(|| "-".to_owned(), |s| format!("{s:.2}"));
        let arrow = match it.trend.flatten() {
            Some(Trend::Improving) => "↑",
            Some(Trend::Stable) => "→",
            Some(Trend::Degrading) => "↓",
            None => "",
        };
        spans.push(Span::raw(format!("it{} {score}{arrow}  ", it.iteration)));
        if it.stall_warning {
            spans.push(Span::styled("stall warning  ", theme.fg(Color::Yellow)));
        }
        if it.error.is_some() {
            spans.push(Span::styled("failed  ", theme.fg(Color::Red)));
        }
    }
    let last = d.iterations.last();
    let trend = last
        .and_then(|i| i.trend.flatten())
        .map_or("-", |t| t.as_str());
    let lines = vec![
        Line::from(spans),
        Line::raw(format!(
            "iteration {} · trend {trend}{}",
            last.map_or(0, |i| i.iteration),
            if last.is_some_and(|i| i.complete) {
                " · evaluator: complete"
            } else {
                ""
            }
        )),
    ];
    frame.render_widget(Paragraph::new(lines).block(block(" Reflect ", false)), area);
}

fn draw_activity(frame: &mut Frame<'_>, area: Rect, d: &RunDetail, theme: &Theme) {
    let name = d
        .selected_agent()
        .map(|a| clean(&a.name))
        .unwrap_or_default();
    let height = area.height.saturating_sub(2) as usize;
    let lines: Vec<Line<'_>> = match d.selected_activity() {
        Some(list) => list
            .iter()
            .skip(list.len().saturating_sub(height))
            .map(|a| match a {
                Activity::Turn {
                    turn,
                    text,
                    tools,
                    tokens: (i, o),
                } => Line::raw(format!(
                    "turn {turn}: {text}{} ({i}/{o} tok)",
                    if tools.is_empty() {
                        String::new()
                    } else {
                        format!(" → {}", tools.join(", "))
                    }
                )),
                Activity::Tool {
                    turn,
                    tool,
                    args,
                    ok,
                } => Line::styled(
                    format!(
                        "  {} {tool} {args} (turn {turn})",
                        if *ok { "✓" } else { "✗" }
                    ),
                    theme.fg(if *ok { Color::Green } else { Color::Red }),
                ),
                Activity::Steered { message } => {
                    Line::styled(format!("  steered: {message}"), theme.fg(Color::Yellow))
                }
            })
            .collect(),
        None => vec![Line::raw("no turns yet")],
    };
    frame.render_widget(
        Paragraph::new(lines).block(block(&format!(" Activity: {name} "), false)),
        area,
    );
}

fn draw_modal(frame: &mut Frame<'_>, modal: &Modal) {
    let (title, text) = match modal {
        Modal::None => return,
        Modal::Help => (
            " Keys ",
            "↑/↓ or j/k   move in the focused list (PgUp/PgDn: by 10)\n\
             Tab, ←/→     switch between runs and agents (Enter: to agents)\n\
             s            steer the selected agent (type, Enter, then y)\n\
             x            stop the selected agent, or the selected run from the runs list\n\
             m            send a message to the selected run's team (reflect loops)\n\
             r            resume the selected interrupted run in a new process\n\
             ?            this help · any key closes it\n\
             q, Esc       quit (runs go on; the dashboard only watches)"
                .to_owned(),
        ),
        Modal::Input { typing, text } => (
            match typing {
                Typing::Steer { .. } => " Steer ",
                Typing::Send { .. } => " Message the team ",
            },
            format!(
                "{}\n> {}▏\n\nEnter: continue · Esc: cancel",
                match typing {
                    Typing::Steer { name, .. } => format!("Message for {}:", clean(name)),
                    Typing::Send { team } => format!("Message for team {}:", clean(team)),
                },
                text
            ),
        ),
        Modal::Confirm(action) => (
            " Confirm ",
            format!(
                "{}\n\ny: yes · any other key: no",
                clean(&action.question())
            ),
        ),
    };
    let area = centred(frame.area(), 84, 12);
    frame.render_widget(Clear, area);
    frame.render_widget(
        Paragraph::new(text)
            .wrap(Wrap { trim: false })
            .block(Block::new().borders(Borders::ALL).title(title)),
        area,
    );
}

fn centred(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

/// The id's tail every command accepts (see [`MIN_TAIL`](crewbox::types::MIN_TAIL)), with its kind.
fn short(id: &str) -> String {
    let tail = crewbox::types::MIN_TAIL;
    let start = id.char_indices().rev().nth(tail - 1).map_or(0, |(i, _)| i);
    id[start..].to_owned()
}

fn elapsed(from: i64, to: Option<i64>, now: i64) -> String {
    duration(to.unwrap_or(now) - from)
}

fn duration(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

fn tokens(n: u64) -> String {
    match n {
        0..1000 => n.to_string(),
        1000..1_000_000 => format!("{:.1}k", n as f64 / 1000.0),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{agent, team_run};
    use super::super::model::RunDetail;
    use super::*;
    use crewbox::event::{Event, EventRecord, IterationRecord};
    use crewbox::{Mode, RunId};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    fn model() -> Dashboard {
        let run = RunId::from_string(String::from("r-0001aaaa"));
        let mut m = Dashboard::default();
        m.set_runs(vec![RunRow {
            prompt: "build a queue\u{1b}[2J".into(),
            tokens: (3000, 40),
            ..team_run("r-0001aaaa", Mode::Reflect)
        }]);
        let mut d = RunDetail::new(run.clone());
        d.set_agents(vec![
            agent("a-orch00", "orchestrator", None, AgentState::Completed, 1),
            agent(
                "a-alice0",
                "alice",
                Some("a-orch00"),
                AgentState::Running,
                2,
            ),
            agent("a-bob000", "bob", Some("a-orch00"), AgentState::Queued, 3),
        ]);
        d.apply(&EventRecord {
            seq: 9,
            run_id: run,
            agent_id: None,
            at: 9,
            event: Event::ReflectIteration(IterationRecord {
                iteration: 1,
                score: Some(0.4),
                trend: Some(None),
                stall_warning: true,
                ..IterationRecord::default()
            }),
        });
        m.detail = Some(d);
        m
    }

    fn screen(model: &Dashboard, ui: &Ui, width: u16, height: u16) -> String {
        let mut term = Terminal::new(TestBackend::new(width, height)).unwrap();
        term.draw(|f| {
            draw(
                f,
                model,
                ui,
                &View {
                    repo: "repo",
                    now: 65_000,
                    colour: true,
                    problem: None,
                },
            )
        })
        .unwrap();
        let buf = term.backend().buffer();
        let mut out = String::new();
        for y in 0..buf.area.height {
            for x in 0..buf.area.width {
                out.push_str(buf[(x, y)].symbol());
            }
            out.push('\n');
        }
        out
    }

    #[test]
    fn a_team_run_shows_its_tree_phase_and_iterations() {
        let text = screen(&model(), &Ui::default(), 160, 48);
        assert!(text.contains("r-0001aaaa"), "{text}");
        assert!(text.contains("running"), "{text}");
        assert!(text.contains("1m05s"), "elapsed: {text}");
        let orch = text.find("orchestrator").unwrap();
        let alice = text.find("└ alice").unwrap();
        let bob = text.find("└ bob").unwrap();
        assert!(
            orch < alice && alice < bob,
            "workers under the orchestrator: {text}"
        );
        assert!(text.contains("it1 0.40"), "{text}");
        assert!(text.contains("stall warning"), "{text}");
        assert!(text.contains("starting"), "the phase: {text}");
        assert!(text.contains("? help"), "keys on screen: {text}");
        assert!(!text.contains('\u{1b}'), "no escapes from the prompt");
    }

    #[test]
    fn it_fits_small_terminals_and_shows_modals() {
        let mut ui = Ui {
            focus: Focus::Agents,
            ..Ui::default()
        };
        ui.modal = Modal::Confirm(super::super::input::Action::StopRun {
            run: RunId::from_string(String::from("r-0001aaaa")),
        });
        let text = screen(&model(), &ui, 60, 16);
        assert!(text.contains("Confirm"), "{text}");
        assert!(text.contains("y: yes"), "{text}");
        ui.modal = Modal::Help;
        let text = screen(&model(), &ui, 100, 30);
        assert!(text.contains("steer the selected agent"), "{text}");
        // Tiny terminals draw without panicking.
        screen(&model(), &ui, 10, 3);
    }
}
