//! The console's state and what each key does to it. Handlers change state and may
//! return a [`Command`] for the control plane; drawing only reads the state (`ui`).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::collections::{BTreeMap, HashMap, VecDeque};

use seckill_core::campaign::{Action, State};

use crate::command::{Command, Done};
use crate::data::{CampaignRow, Snapshot};
use crate::prompt::{self, Prompt};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Campaigns,
    Detail,
    Fleet,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Popup {
    Help,
    Confirm {
        question: String,
        command: Command,
    },
    Input {
        prompt: Prompt,
        text: String,
    },
    Report {
        title: String,
        lines: Vec<String>,
        scroll: u16,
    },
}

/// The console's link to Redis.
#[derive(Debug, Clone, PartialEq)]
pub enum Link {
    Connecting,
    Up,
    /// Unreachable since then (ms); the data shown is the last that was read.
    Lost {
        since_ms: i64,
        error: String,
    },
}

/// Fleet answers per second by outcome, and units taken per campaign, one sample per
/// refresh.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    pub at_ms: i64,
    pub outcomes: BTreeMap<String, f64>,
    pub taken: HashMap<String, i64>,
}

/// Samples kept: five minutes at one a second.
pub const HISTORY: usize = 300;

pub struct App {
    pub redis_url: String,
    pub view: View,
    pub selected: usize,
    pub popup: Option<Popup>,
    pub snapshot: Snapshot,
    pub link: Link,
    pub history: VecDeque<Sample>,
    /// The last command's outcome: text, and whether it failed.
    pub status: Option<(String, bool)>,
    /// A campaign to open in the detail view as soon as it exists.
    pub focus: Option<String>,
    pub quit: bool,
}

fn plain(key: &KeyEvent) -> bool {
    !key.modifiers
        .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
}

impl App {
    pub fn new(redis_url: &str) -> App {
        App {
            redis_url: redis_url.to_string(),
            view: View::Campaigns,
            selected: 0,
            popup: None,
            snapshot: Snapshot::default(),
            link: Link::Connecting,
            history: VecDeque::new(),
            status: None,
            focus: None,
            quit: false,
        }
    }

    /// The campaign the cursor is on.
    pub fn current(&self) -> Option<&CampaignRow> {
        self.snapshot.campaigns.get(self.selected)
    }

    /// A fresh read of the control plane, or why there was none.
    pub fn on_data(&mut self, data: Result<Snapshot, String>) {
        match data {
            Ok(s) => {
                let previous = self.current().map(|c| c.id().to_string());
                self.snapshot = s;
                self.link = Link::Up;
                // Keep the cursor on the same campaign when others come or go.
                if let Some(id) = previous {
                    if let Some(i) = self.snapshot.campaigns.iter().position(|c| c.id() == id) {
                        self.selected = i;
                    }
                }
                self.selected = self
                    .selected
                    .min(self.snapshot.campaigns.len().saturating_sub(1));
                if let Some(id) = &self.focus {
                    if let Some(i) = self.snapshot.campaigns.iter().position(|c| c.id() == id) {
                        self.selected = i;
                        self.view = View::Detail;
                        self.focus = None;
                    }
                }
                self.history.push_back(Sample {
                    at_ms: self.snapshot.at_ms,
                    outcomes: self.snapshot.fleet.outcomes_per_s(),
                    taken: self
                        .snapshot
                        .campaigns
                        .iter()
                        .map(|c| (c.id().to_string(), c.taken()))
                        .collect(),
                });
                while self.history.len() > HISTORY {
                    self.history.pop_front();
                }
            }
            Err(error) => {
                let since_ms = match &self.link {
                    Link::Lost { since_ms, .. } => *since_ms,
                    _ => seckill_core::now_ms(),
                };
                self.link = Link::Lost { since_ms, error };
            }
        }
    }

    /// Units taken per second over the last ten samples.
    pub fn sell_through(&self, id: &str) -> Option<f64> {
        let last = self.history.back()?;
        let first = self.history.get(self.history.len().saturating_sub(11))?;
        let dt = (last.at_ms - first.at_ms) as f64 / 1000.0;
        if dt <= 0.0 {
            return None;
        }
        let d = last.taken.get(id)? - first.taken.get(id).copied().unwrap_or(0);
        Some(d.max(0) as f64 / dt)
    }

    /// What a command came back with.
    pub fn on_done(&mut self, r: Result<Done, String>) {
        match r {
            Ok(Done::Message(m)) => self.status = Some((m, false)),
            Ok(Done::Report { title, text }) => {
                self.status = None;
                self.popup = Some(Popup::Report {
                    title,
                    lines: text.lines().map(str::to_string).collect(),
                    scroll: 0,
                });
            }
            Err(e) => self.status = Some((e, true)),
        }
    }

    fn fail(&mut self, message: impl Into<String>) {
        self.status = Some((message.into(), true));
    }

    /// Handles one key; a key that changes the control plane returns its command.
    pub fn on_key(&mut self, key: KeyEvent) -> Option<Command> {
        if key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL) {
            self.quit = true;
            return None;
        }
        if let Some(popup) = self.popup.take() {
            return self.on_popup_key(popup, key);
        }
        if !plain(&key) {
            return None;
        }
        match key.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char('?') => self.popup = Some(Popup::Help),
            KeyCode::Char('1') => self.view = View::Campaigns,
            KeyCode::Char('2') => self.view = View::Fleet,
            KeyCode::Tab => {
                self.view = match self.view {
                    View::Campaigns => View::Detail,
                    View::Detail => View::Fleet,
                    View::Fleet => View::Campaigns,
                }
            }
            KeyCode::Esc if self.view == View::Detail => self.view = View::Campaigns,
            KeyCode::Char('l') => self.ask(Prompt::Limits, ""),
            KeyCode::Char('L') => {
                self.popup = Some(Popup::Confirm {
                    question:
                        "Drop every limit override? Nodes go back to their configured limits."
                            .into(),
                    command: Command::ResetLimits,
                })
            }
            KeyCode::Char('b') => self.ask(Prompt::Block, ""),
            KeyCode::Char('u') => self.ask(Prompt::Unblock, ""),
            _ if self.view == View::Fleet => {}
            code => return self.on_campaign_key(code),
        }
        None
    }

    fn ask(&mut self, prompt: Prompt, text: &str) {
        self.popup = Some(Popup::Input {
            prompt,
            text: text.into(),
        });
    }

    fn on_campaign_key(&mut self, code: KeyCode) -> Option<Command> {
        let count = self.snapshot.campaigns.len();
        match code {
            KeyCode::Up | KeyCode::Char('k') => self.selected = self.selected.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => {
                self.selected = (self.selected + 1).min(count.saturating_sub(1))
            }
            KeyCode::Home | KeyCode::Char('g') => self.selected = 0,
            KeyCode::End | KeyCode::Char('G') => self.selected = count.saturating_sub(1),
            KeyCode::Enter if count > 0 => self.view = View::Detail,
            KeyCode::Char('n') => self.ask(Prompt::CreateFrom, "config/campaigns/"),
            KeyCode::Char('a') => {
                let c = self.current()?;
                let id = c.id().to_string();
                if c.campaign.state != State::Draft && c.campaign.state != State::Arming {
                    self.fail(format!(
                        "{id} is {}: only a draft is armed",
                        c.campaign.state
                    ));
                    return None;
                }
                return Some(Command::Arm { id });
            }
            KeyCode::Char('s') => return self.lifecycle(Action::Start),
            KeyCode::Char('p') => return self.lifecycle(Action::Pause),
            KeyCode::Char('r') => return self.lifecycle(Action::Resume),
            KeyCode::Char('x') => return self.lifecycle(Action::Stop),
            KeyCode::Char('c') => {
                let id = self.current()?.id().to_string();
                self.status = Some((format!("reconciling {id} …"), false));
                return Some(Command::Reconcile { id });
            }
            KeyCode::Char('w') => self.ask_admit_rate(),
            _ => {}
        }
        None
    }

    /// Asks for a new admission rate for the current campaign's waiting room; refused
    /// here for a campaign without one, or one whose room has closed.
    fn ask_admit_rate(&mut self) {
        let Some(c) = self.current() else { return };
        let id = c.id().to_string();
        let Some(now) = c.admit_per_s() else {
            self.fail(format!("{id} has no waiting room"));
            return;
        };
        if c.campaign.state == State::Ended {
            self.fail(format!("{id} is ended: its waiting room is closed"));
            return;
        }
        self.ask(Prompt::AdmitRate { id, now }, "");
    }

    /// A lifecycle action on the current campaign: refused here when its state does not
    /// allow it; resuming goes at once, the others ask first.
    fn lifecycle(&mut self, action: Action) -> Option<Command> {
        let c = self.current()?;
        let id = c.id().to_string();
        let (from, _) = action.transition();
        if !from.contains(&c.campaign.state) {
            let allowed: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
            self.fail(format!(
                "{id} is {}: {} needs it {}",
                c.campaign.state,
                action.name(),
                allowed.join(" or ")
            ));
            return None;
        }
        let command = Command::Act { id, action };
        if action == Action::Resume {
            return Some(command);
        }
        let question = match action {
            Action::Start => format!("Open the sale of {} now? Shoppers can buy at once.", c.id()),
            Action::Pause => format!("Pause {}? Purchases are refused until it resumes.", c.id()),
            _ => format!(
                "Stop {} for good? The sale ends; it cannot be restarted.",
                c.id()
            ),
        };
        self.popup = Some(Popup::Confirm { question, command });
        None
    }

    fn on_popup_key(&mut self, popup: Popup, key: KeyEvent) -> Option<Command> {
        match popup {
            Popup::Help => None,
            Popup::Confirm { command, question } => match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') => Some(command),
                KeyCode::Char('n') | KeyCode::Char('N') | KeyCode::Esc | KeyCode::Char('q') => {
                    self.status = Some(("cancelled".into(), false));
                    None
                }
                _ => {
                    self.popup = Some(Popup::Confirm { question, command });
                    None
                }
            },
            Popup::Input { prompt, mut text } => match key.code {
                KeyCode::Esc => None,
                KeyCode::Enter => match prompt::parse(&prompt, &text) {
                    Ok(c) => Some(c),
                    Err(e) => {
                        self.fail(e);
                        self.popup = Some(Popup::Input { prompt, text });
                        None
                    }
                },
                KeyCode::Backspace => {
                    text.pop();
                    self.popup = Some(Popup::Input { prompt, text });
                    None
                }
                KeyCode::Char(ch) if plain(&key) => {
                    if text.len() < 256 {
                        text.push(ch);
                    }
                    self.popup = Some(Popup::Input { prompt, text });
                    None
                }
                _ => {
                    self.popup = Some(Popup::Input { prompt, text });
                    None
                }
            },
            Popup::Report {
                title,
                lines,
                scroll,
            } => {
                let last = lines.len().saturating_sub(1) as u16;
                let scroll = match key.code {
                    KeyCode::Esc | KeyCode::Char('q') | KeyCode::Enter => return None,
                    KeyCode::Down | KeyCode::Char('j') => scroll.saturating_add(1).min(last),
                    KeyCode::Up | KeyCode::Char('k') => scroll.saturating_sub(1),
                    KeyCode::PageDown | KeyCode::Char(' ') => scroll.saturating_add(10).min(last),
                    KeyCode::PageUp => scroll.saturating_sub(10),
                    KeyCode::Home | KeyCode::Char('g') => 0,
                    KeyCode::End | KeyCode::Char('G') => last,
                    _ => scroll,
                };
                self.popup = Some(Popup::Report {
                    title,
                    lines,
                    scroll,
                });
                None
            }
        }
    }

    /// The keys that work where the console is now, for `?` and the footer.
    pub fn keys(&self) -> Vec<(&'static str, &'static str)> {
        let mut k = Vec::new();
        match &self.popup {
            Some(Popup::Confirm { .. }) => return vec![("y", "yes"), ("n / Esc", "no")],
            Some(Popup::Input { .. }) => return vec![("Enter", "apply"), ("Esc", "cancel")],
            Some(Popup::Report { .. }) => {
                return vec![
                    ("↑↓ j k", "scroll"),
                    ("PgUp PgDn", "page"),
                    ("Esc q", "close"),
                ]
            }
            Some(Popup::Help) => return vec![("any key", "close")],
            None => {}
        }
        if self.view == View::Campaigns {
            k.extend([("↑↓ j k", "select"), ("Enter", "detail")]);
        }
        if self.view == View::Detail {
            k.push(("Esc", "back"));
        }
        if self.view != View::Fleet {
            k.extend([
                ("n", "new from file"),
                ("a", "arm"),
                ("s", "start"),
                ("p", "pause"),
                ("r", "resume"),
                ("x", "stop"),
                ("c", "reconcile"),
                ("w", "admission rate"),
            ]);
        }
        k.extend([
            ("l", "set limits"),
            ("L", "reset limits"),
            ("b", "block"),
            ("u", "unblock"),
            ("1 2 Tab", "views"),
            ("?", "keys"),
            ("q", "quit"),
        ]);
        k
    }
}
