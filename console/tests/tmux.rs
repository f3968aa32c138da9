//! The console in a real terminal: started under tmux against a redis-server of the
//! test's own, driven with keys, read off the screen.

mod common;

use common::*;
use seckill_testkit::wait_until;
use std::process::Command;
use std::time::Duration;

use seckill_core::campaign::{CampaignSpec, State};
use seckill_core::control;

/// A tmux server of the test's own (its own socket), killed at the end.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux (install it: apt-get install tmux)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "console"])
    }

    fn keys(&self, keys: &str) {
        self.run(&["send-keys", "-t", "console", keys]);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.run(&["kill-server"]);
    }
}

#[test]
fn an_operator_starts_a_sale_from_the_console() {
    let mut redis = Redis::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut con = redis.con();
    let text = std::fs::read_to_string(campaign_file(dir.path(), "launch")).expect("read");
    control::create(&mut con, CampaignSpec::from_toml(&text).expect("spec")).expect("create");
    control::arm(&mut con, "launch").expect("arm");

    let tmux = Tmux {
        socket: format!("seckill-test-{}", std::process::id()),
    };
    let console = format!(
        "{} --redis redis://seckill-ops@127.0.0.1:{} --redis-password-file {} --refresh-ms 200",
        env!("CARGO_BIN_EXE_seckill-console"),
        redis.port,
        redis.ops_password_file().display()
    );
    tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "console",
        "-x",
        "80",
        "-y",
        "24",
        &console,
    ]);
    wait_until("the campaign on screen", Duration::from_secs(10), || {
        let s = tmux.screen();
        s.contains("launch") && s.contains("armed") && s.contains("● connected")
    });

    // s, then y at the question: the sale opens, in Redis and on screen.
    tmux.keys("s");
    wait_until("the confirmation", Duration::from_secs(5), || {
        tmux.screen().contains("Open the sale of launch now?")
    });
    tmux.keys("y");
    wait_until("the sale to open", Duration::from_secs(5), || {
        control::get(&mut con, "launch").expect("campaign").state == State::Live
    });
    wait_until("the screen to show it", Duration::from_secs(5), || {
        let s = tmux.screen();
        s.contains("launch is live") && s.contains(" live ")
    });

    // Redis goes away: the console says so and keeps the picture; it comes back.
    redis.kill();
    wait_until("the console to notice", Duration::from_secs(10), || {
        let s = tmux.screen();
        s.contains("✗ no Redis since") && s.contains("launch")
    });
    redis.restart();
    wait_until("the console to reconnect", Duration::from_secs(10), || {
        tmux.screen().contains("● connected")
    });
    let mut con = redis.con();
    assert_eq!(
        control::get(&mut con, "launch").expect("campaign").state,
        State::Live
    );

    // The detail view shows the ledger line; q quits and leaves the shell's screen.
    tmux.keys("Enter");
    wait_until("the ledger line", Duration::from_secs(5), || {
        tmux.screen()
            .contains("ledger ✓ 100 left + 0 moving + 0 held + 0 sold = 100 total")
    });
    tmux.keys("q");
    wait_until("the console to quit", Duration::from_secs(5), || {
        !tmux.run(&["list-sessions"]).contains("console")
    });
}
