//! The test every program's command line passes: completions and manual pages.

use std::process::Command;

fn run(bin: &str, args: &[&str]) -> (i32, String) {
    let o = Command::new(bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {bin}: {e}"));
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// The completions and manual page of the program `name` at `bin` come from its command
/// line's own definition.
pub fn completions_and_manual_pages(bin: &str, name: &str) {
    for shell in ["bash", "zsh", "fish"] {
        let (code, script) = run(bin, &["completions", shell]);
        assert_eq!(code, 0, "{shell}");
        assert!(
            script.contains(name) && script.contains("redis"),
            "{shell}: {script}"
        );
    }
    let (code, page) = run(bin, &["man"]);
    assert_eq!(code, 0);
    assert!(page.contains(&format!(".TH {name} 1")), "{page}");
    // An unknown shell is a usage error, exit 2.
    assert_eq!(run(bin, &["completions", "nosh"]).0, 2);
}
