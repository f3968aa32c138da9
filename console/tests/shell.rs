//! The command line's completions and manual pages, generated from its definition.

use std::process::Command;

fn run(args: &[&str]) -> (i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_seckill-console"))
        .args(args)
        .output()
        .expect("run seckill-console");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

#[test]
fn completions_and_manual_pages_come_from_the_command_line_itself() {
    for shell in ["bash", "zsh", "fish"] {
        let (code, script) = run(&["completions", shell]);
        assert_eq!(code, 0, "{shell}");
        assert!(
            script.contains("seckill-console") && script.contains("redis"),
            "{shell}: {script}"
        );
    }
    let (code, page) = run(&["man"]);
    assert_eq!(code, 0);
    assert!(page.contains(".TH seckill-console 1"), "{page}");
    // An unknown shell is a usage error, exit 2.
    assert_eq!(run(&["completions", "nosh"]).0, 2);
}
