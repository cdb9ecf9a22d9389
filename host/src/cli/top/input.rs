//! Keys to intents: which pane has the focus, the text being typed and the question
//! awaiting a `y`. Pure state; the loop performs what [`Ui::key`] returns.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::model::Dashboard;
use crewbox::types::AgentState;
use crewbox::{AgentId, RunId};

/// Which list the arrow keys move in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Focus {
    /// The runs.
    #[default]
    Runs,
    /// The selected run's agents.
    Agents,
}

/// Something that changes a run, asked for and confirmed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Queue a steering message for an agent.
    Steer {
        /// The agent.
        agent: AgentId,
        /// Its name.
        name: String,
        /// The message.
        message: String,
    },
    /// Stop one agent.
    StopAgent {
        /// The agent.
        agent: AgentId,
        /// Its name.
        name: String,
    },
    /// Stop a whole run.
    StopRun {
        /// The run.
        run: RunId,
    },
    /// Send a message to a team's reflect loop.
    Send {
        /// The team.
        team: String,
        /// The message.
        message: String,
    },
    /// Resume an interrupted run in a process of its own.
    Resume {
        /// The run.
        run: RunId,
    },
}

impl Action {
    /// The question asked before it is done.
    pub fn question(&self) -> String {
        match self {
            Self::Steer { name, message, .. } => format!("Steer {name} with \"{message}\"?"),
            Self::StopAgent { name, agent } => format!("Stop agent {name} ({agent})?"),
            Self::StopRun { run } => format!("Stop run {run} and all its agents?"),
            Self::Send { team, message } => format!("Send \"{message}\" to team {team}?"),
            Self::Resume { run } => format!("Resume run {run} in a new process?"),
        }
    }
}

/// What a typed text is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Typing {
    /// A steering message for an agent.
    Steer {
        /// The agent.
        agent: AgentId,
        /// Its name.
        name: String,
    },
    /// A message for a team.
    Send {
        /// The team.
        team: String,
    },
}

/// An overlay that takes the keys.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Modal {
    /// None: keys go to the panes.
    #[default]
    None,
    /// The key help.
    Help,
    /// Text being typed.
    Input {
        /// What for.
        typing: Typing,
        /// The text so far.
        text: String,
    },
    /// An action awaiting `y`.
    Confirm(Action),
}

/// What the loop does after a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Intent {
    /// Nothing more (the screen may have changed).
    Redraw,
    /// Leave the dashboard.
    Quit,
    /// Perform a confirmed action.
    Perform(Action),
}

/// The dashboard's input state.
#[derive(Clone, Debug, Default)]
pub struct Ui {
    /// The focused pane.
    pub focus: Focus,
    /// The overlay.
    pub modal: Modal,
    /// The last action's outcome, shown in the status line.
    pub notice: Option<String>,
}

/// The longest message typed in the dashboard (what `crewbox send` accepts).
const MAX_TYPED: usize = crewbox::types::MAX_MESSAGE_BYTES;

impl Ui {
    /// Handles one key.
    pub fn key(&mut self, key: KeyEvent, model: &mut Dashboard) -> Intent {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Intent::Quit;
        }
        match std::mem::take(&mut self.modal) {
            Modal::None => self.pane_key(key, model),
            Modal::Help => Intent::Redraw,
            Modal::Input { typing, mut text } => match key.code {
                KeyCode::Esc => Intent::Redraw,
                KeyCode::Enter if text.trim().is_empty() => {
                    self.notice = Some("nothing typed; cancelled".into());
                    Intent::Redraw
                }
                KeyCode::Enter => {
                    let message = text.trim().to_owned();
                    self.modal = Modal::Confirm(match typing {
                        Typing::Steer { agent, name } => Action::Steer {
                            agent,
                            name,
                            message,
                        },
                        Typing::Send { team } => Action::Send { team, message },
                    });
                    Intent::Redraw
                }
                KeyCode::Backspace => {
                    text.pop();
                    self.modal = Modal::Input { typing, text };
                    Intent::Redraw
                }
                KeyCode::Char(c) if !c.is_control() => {
                    if text.len() + c.len_utf8() <= MAX_TYPED {
                        text.push(c);
                    }
                    self.modal = Modal::Input { typing, text };
                    Intent::Redraw
                }
                _ => {
                    self.modal = Modal::Input { typing, text };
                    Intent::Redraw
                }
            },
            Modal::Confirm(action) => match key.code {
                KeyCode::Char('y' | 'Y') => Intent::Perform(action),
                _ => {
                    self.notice = Some("cancelled".into());
                    Intent::Redraw
                }
            },
        }
    }

    fn pane_key(&mut self, key: KeyEvent, model: &mut Dashboard) -> Intent {
        let delta = match key.code {
            KeyCode::Up | KeyCode::Char('k') => Some(-1),
            KeyCode::Down | KeyCode::Char('j') => Some(1),
            KeyCode::PageUp => Some(-10),
            KeyCode::PageDown => Some(10),
            _ => None,
        };
        if let Some(delta) = delta {
            match self.focus {
                Focus::Runs => model.move_run(delta),
                Focus::Agents => {
                    if let Some(d) = model.detail.as_mut() {
                        d.move_agent(delta);
                    }
                }
            }
            return Intent::Redraw;
        }
        let agent = || {
            model
                .detail
                .as_ref()
                .filter(|_| self.focus == Focus::Agents)
                .and_then(|d| d.selected_agent())
        };
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc => return Intent::Quit,
            KeyCode::Char('?') | KeyCode::Char('h') => self.modal = Modal::Help,
            KeyCode::Tab | KeyCode::BackTab | KeyCode::Left | KeyCode::Right => {
                self.focus = match self.focus {
                    Focus::Runs => Focus::Agents,
                    Focus::Agents => Focus::Runs,
                }
            }
            KeyCode::Enter if self.focus == Focus::Runs => self.focus = Focus::Agents,
            KeyCode::Char('s') => match agent() {
                Some(a) if live(a.state) => {
                    self.modal = Modal::Input {
                        typing: Typing::Steer {
                            agent: a.id.clone(),
                            name: a.name.clone(),
                        },
                        text: String::new(),
                    }
                }
                Some(a) => {
                    self.notice = Some(format!("{} has already ended ({})", a.name, a.state))
                }
                None => self.notice = Some("select an agent first (Tab, then ↑/↓)".into()),
            },
            KeyCode::Char('x') => {
                let action = match (self.focus, agent(), model.selected_run()) {
                    (Focus::Agents, Some(a), _) if live(a.state) => Some(Action::StopAgent {
                        agent: a.id.clone(),
                        name: a.name.clone(),
                    }),
                    (Focus::Agents, Some(a), _) => {
                        self.notice = Some(format!("{} has already ended ({})", a.name, a.state));
                        None
                    }
                    (_, _, Some(run)) if run.status == crewbox::RunStatus::Running => {
                        Some(Action::StopRun {
                            run: run.id.clone(),
                        })
                    }
                    (_, _, Some(run)) => {
                        self.notice = Some(format!("run {} has ended ({})", run.id, run.status));
                        None
                    }
                    (_, _, None) => None,
                };
                if let Some(action) = action {
                    self.modal = Modal::Confirm(action);
                }
            }
            KeyCode::Char('m') => match model.selected_run() {
                Some(run) if run.team.is_some() && run.status == crewbox::RunStatus::Running => {
                    self.modal = Modal::Input {
                        typing: Typing::Send {
                            team: run.team.clone().unwrap_or_default(),
                        },
                        text: String::new(),
                    }
                }
                _ => self.notice = Some("select a running team run to message its team".into()),
            },
            KeyCode::Char('r') => match model.selected_run() {
                Some(run) if run.is_interrupted() => {
                    self.modal = Modal::Confirm(Action::Resume {
                        run: run.id.clone(),
                    })
                }
                Some(run) => {
                    self.notice = Some(format!(
                        "run {} is not interrupted ({})",
                        run.id,
                        if run.status == crewbox::RunStatus::Running {
                            "a live process drives it"
                        } else {
                            run.status.as_str()
                        }
                    ))
                }
                None => {}
            },
            _ => {}
        }
        Intent::Redraw
    }
}

fn live(state: AgentState) -> bool {
    !state.is_terminal()
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{agent, team_run};
    use super::super::model::RunDetail;
    use super::*;
    use crewbox::Mode;

    fn press(ui: &mut Ui, model: &mut Dashboard, keys: &str) -> Intent {
        let mut last = Intent::Redraw;
        for c in keys.chars() {
            let code = match c {
                '\t' => KeyCode::Tab,
                '\n' => KeyCode::Enter,
                c => KeyCode::Char(c),
            };
            last = ui.key(KeyEvent::new(code, KeyModifiers::NONE), model);
        }
        last
    }

    fn model() -> Dashboard {
        let mut m = Dashboard::default();
        m.set_runs(vec![team_run("r-1", Mode::Orchestrate)]);
        let mut d = RunDetail::new(RunId::from_string("r-1"));
        d.set_agents(vec![agent("a-1", "alice", None, AgentState::Running, 0)]);
        m.detail = Some(d);
        m
    }

    #[test]
    fn steering_is_typed_then_confirmed() {
        let (mut ui, mut m) = (Ui::default(), model());
        assert_eq!(press(&mut ui, &mut m, "\tsgo left\n"), Intent::Redraw);
        assert!(matches!(ui.modal, Modal::Confirm(Action::Steer { .. })));
        let done = press(&mut ui, &mut m, "y");
        assert_eq!(
            done,
            Intent::Perform(Action::Steer {
                agent: AgentId::from_string(String::from("a-1")),
                name: "alice".into(),
                message: "go left".into()
            })
        );
    }

    #[test]
    fn anything_but_y_cancels_and_stop_targets_the_focus() {
        let (mut ui, mut m) = (Ui::default(), model());
        press(&mut ui, &mut m, "x");
        assert_eq!(
            ui.modal,
            Modal::Confirm(Action::StopRun {
                run: RunId::from_string(String::from("r-1"))
            })
        );
        assert_eq!(press(&mut ui, &mut m, "n"), Intent::Redraw);
        assert_eq!(ui.modal, Modal::None);
        assert_eq!(ui.notice.as_deref(), Some("cancelled"));
        press(&mut ui, &mut m, "\tx");
        assert!(matches!(ui.modal, Modal::Confirm(Action::StopAgent { .. })));
    }

    #[test]
    fn resume_only_for_interrupted_runs_and_q_quits() {
        let (mut ui, mut m) = (Ui::default(), model());
        press(&mut ui, &mut m, "r");
        assert_eq!(ui.modal, Modal::None);
        assert!(ui.notice.as_deref().unwrap().contains("not interrupted"));
        assert_eq!(press(&mut ui, &mut m, "q"), Intent::Quit);
        // In a text field `q` is a letter.
        press(&mut ui, &mut m, "m");
        assert_eq!(press(&mut ui, &mut m, "q"), Intent::Redraw);
        assert!(matches!(&ui.modal, Modal::Input { text, .. } if text == "q"));
    }
}
