//! `kanban-gateway`'s command line: help, version, `--home=DIR`, and a usage error.

use std::process::Command;

const GATEWAY: &str = env!("CARGO_BIN_EXE_kanban-gateway");

fn run(args: &[&str]) -> std::process::Output {
    Command::new(GATEWAY)
        .args(args)
        .env_remove("KANBAN_HOME")
        .env_remove("RUST_LOG")
        .output()
        .expect("run kanban-gateway")
}

#[test]
fn help_and_version_go_to_stdout() {
    let out = run(&["--version"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("kanban-gateway {}\n", env!("CARGO_PKG_VERSION"))
    );
    let out = run(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--home <DIR>",
        "--replace",
        "--log-format <FORMAT>",
        "--verbose",
        "--quiet",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
}

#[test]
fn a_bad_line_is_a_usage_error_that_opens_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    let home = dir.path().join("home");
    let flag = format!("--home={}", home.display());
    for args in [
        vec![flag.as_str(), "--log-format", "xml"],
        vec![flag.as_str(), "--bogus"],
        vec![flag.as_str(), "-v", "-q"],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!home.exists(), "{args:?} created the home");
    }
}
