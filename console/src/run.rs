//! The console's one loop: events from the keyboard and from the data thread come in on
//! one channel; keys change the state (and may run a command); every event redraws.

use crossterm::event::{self as term, KeyEventKind};
use seckill_core::connection::Connection;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;

use crate::app::App;
use crate::command::{self, Stores};
use crate::data::{self, Snapshot};

pub enum Event {
    Key(crossterm::event::KeyEvent),
    Resize,
    Data(Result<Snapshot, String>),
}

pub struct Options {
    pub redis: String,
    /// Open this campaign's detail view once it exists.
    pub campaign: Option<String>,
    pub refresh: Duration,
    pub stores: Stores,
}

/// Restores the terminal when dropped, including on the way out of a panic.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// Runs the console until `q`.
pub fn run(opts: Options) -> anyhow::Result<()> {
    // Raw mode, the alternate screen, and a panic hook that restores the terminal.
    let mut terminal = ratatui::init();
    let _restore = Restore;
    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let refresh_now = spawn_reader(&opts, tx.clone(), stop.clone());
    spawn_keys(tx, stop.clone());
    // The header shows where the console is connected, never the password.
    let mut app = App::new(&seckill_core::secrets::redact(&opts.redis));
    app.focus = opts.campaign.clone();
    let mut con: Option<Connection> = None;
    terminal.draw(|f| crate::ui::draw(&app, f))?;
    while !app.quit {
        let Ok(event) = rx.recv() else { break };
        match event {
            Event::Key(key) => {
                if let Some(cmd) = app.on_key(key) {
                    // Show the key's effect (and any "working…" line) before the wait.
                    terminal.draw(|f| crate::ui::draw(&app, f))?;
                    let done = match con.as_mut() {
                        Some(c) => command::execute(c, &cmd, &opts.stores),
                        None => data::connect(&opts.redis)
                            .and_then(|c| command::execute(con.insert(c), &cmd, &opts.stores)),
                    };
                    if done.is_err() {
                        // The next command connects afresh.
                        con = None;
                    }
                    app.on_done(done.map_err(|e| format!("{e:#}")));
                    let _ = refresh_now.send(());
                }
            }
            Event::Resize => {}
            Event::Data(d) => app.on_data(d),
        }
        terminal.draw(|f| crate::ui::draw(&app, f))?;
    }
    stop.store(true, Ordering::Relaxed);
    Ok(())
}

/// Reads the control plane every `refresh`, or at once when asked; reconnects as needed.
fn spawn_reader(opts: &Options, tx: Sender<Event>, stop: Arc<AtomicBool>) -> Sender<()> {
    let (wake, woken): (Sender<()>, Receiver<()>) = mpsc::channel();
    let (url, refresh) = (opts.redis.clone(), opts.refresh);
    std::thread::spawn(move || {
        let mut con: Option<Connection> = None;
        while !stop.load(Ordering::Relaxed) {
            let read = match con.as_mut() {
                Some(c) => data::fetch(c),
                None => data::connect(&url).and_then(|c| data::fetch(con.insert(c))),
            };
            if read.is_err() {
                con = None;
            }
            if tx
                .send(Event::Data(read.map_err(|e| format!("{e:#}"))))
                .is_err()
            {
                return;
            }
            match woken.recv_timeout(refresh) {
                Ok(()) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    });
    wake
}

fn spawn_keys(tx: Sender<Event>, stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match term::poll(Duration::from_millis(100)) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(_) => return,
            }
            let event = match term::read() {
                Ok(term::Event::Key(k)) if k.kind != KeyEventKind::Release => Event::Key(k),
                Ok(term::Event::Resize(..)) => Event::Resize,
                Ok(_) => continue,
                Err(_) => return,
            };
            if tx.send(event).is_err() {
                return;
            }
        }
    });
}
