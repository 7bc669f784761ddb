//! The project's task runner: `cargo xtask <command>`.
//!
//! It only orchestrates cargo and the project's binaries; it depends on nothing of ours
//! at run time, so it builds in seconds.

mod demo;

use std::process::{Command, ExitCode};

const USAGE: &str = "usage: cargo xtask <command>

commands:
  demo    the product on a temporary home: a fake model, a gateway, real workers
  ci      everything CI checks: formatting, clippy with -D warnings, every test
  e2e     the end-to-end suite alone (a real gateway, the fake model, the CLI)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("e2e") => e2e(),
        Some("demo") => demo::run(&workspace_root()),
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
pub(crate) fn run(program: &str, args: &[&str]) -> Result<(), String> {
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

pub(crate) fn workspace_root() -> std::path::PathBuf {
    let manifest_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}

pub(crate) fn cargo() -> String {
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

/// The end-to-end suite: builds the binaries it drives, then runs it.
fn e2e() -> Result<(), String> {
    let cargo = cargo();
    if has_nextest() {
        run(
            &cargo,
            &["nextest", "run", "-p", "cli", "--test", "e2e", "--no-fail-fast"],
        )
    } else {
        run(&cargo, &["test", "-p", "cli", "--test", "e2e", "--no-fail-fast"])
    }
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
