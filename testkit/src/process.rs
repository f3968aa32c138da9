//! A process a test started, killed when dropped, and the data plane's binary.

use std::path::PathBuf;
use std::process::{Child, ExitStatus};

/// A child process; SIGKILL when dropped, so nothing a test started outlives it.
pub struct Process(Option<Child>);

impl Process {
    pub fn new(child: Child) -> Process {
        Process(Some(child))
    }

    /// Whether it still runs (it has not been killed or waited for here).
    pub fn running(&self) -> bool {
        self.0.is_some()
    }

    pub fn pid(&self) -> u32 {
        self.0.as_ref().expect("running").id()
    }

    /// SIGKILL: nothing in flight is finished.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Waits for it to exit on its own.
    pub fn wait(&mut self) -> ExitStatus {
        self.0.take().expect("running").wait().expect("wait")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The data plane's binary, next to the running test's own: cargo builds it for the data
/// plane's tests, and `just test` (`cargo test --workspace`) for every other crate's.
pub fn dataplane_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test path");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let bin = dir.join("seckill-dataplane");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p seckill-dataplane` first (just test does)",
        bin.display()
    );
    bin
}
