//! The deployment units as systemd reads them: `systemd-analyze verify` finds nothing
//! to say about any of them, with the binaries they start where they would be.

use std::process::Command;

#[test]
fn the_systemd_units_verify() {
    let units = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/systemd");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut checked = 0;
    for entry in std::fs::read_dir(units).expect("deploy/systemd") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("unit");
        // The binary as built here stands in for the installed one.
        let text = text.replace(
            "/usr/local/bin/seckill-dataplane",
            env!("CARGO_BIN_EXE_seckill-dataplane"),
        );
        let copy = dir.path().join(path.file_name().expect("name"));
        std::fs::write(&copy, text).expect("copy");
        let out = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&copy)
            .output()
            .expect("systemd-analyze (systemd) is installed");
        let said = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && said.trim().is_empty(),
            "{}: {said}",
            path.display()
        );
        checked += 1;
    }
    assert_eq!(checked, 3, "Redis, node and worker");
}
