//! The project's task runner: `cargo xtask <command>`.
//!
//! It only orchestrates cargo and the project's binaries; it depends on nothing of ours
//! at run time, so it builds in seconds.

use std::process::{Command, ExitCode};

const USAGE: &str = "usage: cargo xtask <command>

commands:
  ci      everything CI checks: formatting, clippy with -D warnings, every test";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(format!("unknown command {other:?}\n\n{USAGE}")),
        None => Err(USAGE.to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Runs a command from the workspace root, echoing it first; fails on a non-zero exit.
fn run(program: &str, args: &[&str]) -> Result<(), String> {
    eprintln!("xtask: $ {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .current_dir(workspace_root())
        .status()
        .map_err(|e| format!("could not start {program}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{program} {}` failed ({status})", args.join(" ")))
    }
}

fn workspace_root() -> std::path::PathBuf {
    let manifest_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

fn has_nextest() -> bool {
    Command::new(cargo())
        .args(["nextest", "--version"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Formatting, lints, then every test: one build of the test profile, run in parallel.
fn ci() -> Result<(), String> {
    let cargo = cargo();
    run(&cargo, &["fmt", "--all", "--", "--check"])?;
    run(
        &cargo,
        &["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"],
    )?;
    if has_nextest() {
        run(&cargo, &["nextest", "run", "--workspace", "--no-fail-fast"])?;
    } else {
        eprintln!("xtask: cargo-nextest not found; running cargo test");
        run(
            &cargo,
            &["test", "--workspace", "--no-fail-fast", "--all-targets"],
        )?;
    }
    run(&cargo, &["test", "--workspace", "--doc"])
}
