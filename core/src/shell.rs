//! What every program's command line offers beside its work: completions for a shell and
//! a manual page, both generated from the program's own clap definition.

use std::io::Write;

pub use clap_complete::Shell;

/// Writes the completion script of `cmd` for `shell` to standard output.
pub fn completions(mut cmd: clap::Command, shell: Shell) {
    let name = cmd.get_name().to_string();
    clap_complete::generate(shell, &mut cmd, name, &mut std::io::stdout());
}

/// Writes the manual page of `cmd` (roff, section 1) to standard output, with a page of
/// its own for each subcommand after it.
pub fn man(cmd: clap::Command) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    clap_mangen::Man::new(cmd.clone()).render(&mut out)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("{}-{}", cmd.get_name(), sub.get_name());
        writeln!(out)?;
        clap_mangen::Man::new(sub.clone())
            .title(name)
            .render(&mut out)?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    /// An example program.
    #[derive(Parser)]
    #[command(name = "example")]
    struct Example {
        /// A flag.
        #[arg(long)]
        flag: bool,
    }

    #[test]
    fn a_manual_page_and_completions_come_from_the_definition() {
        let mut page = Vec::new();
        clap_mangen::Man::new(Example::command())
            .render(&mut page)
            .expect("render");
        let page = String::from_utf8(page).expect("utf-8");
        assert!(
            page.contains(".TH example") && page.contains("flag"),
            "{page}"
        );
        let mut script = Vec::new();
        clap_complete::generate(Shell::Bash, &mut Example::command(), "example", &mut script);
        assert!(String::from_utf8_lossy(&script).contains("--flag"));
    }
}
