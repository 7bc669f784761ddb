//! The project's task runner: `cargo xtask <command>`.
//!
//! It only orchestrates cargo and the project's binaries; it depends on nothing of ours
//! at run time, so it builds in seconds.

mod bench;
mod demo;
mod deps;
mod mutants;
mod pg;
mod purity;
mod sizes;
mod venv;

use std::process::{Command, ExitCode};

const USAGE: &str = "usage: cargo xtask <command>

commands:
  demo    the product on a temporary home: a fake model, a gateway, real workers
  ci      everything CI checks: formatting, sizes, purity, deps, clippy with -D warnings, every test
  sizes   no source file over 600 lines, no function over 80, unless a `// size:` comment says why
  purity  board-core and the gateway planner name no clock, file, process, thread, socket or async
  deps    every crate uses each dependency it declares
  venv    the Python virtualenv the tests drive our binaries from (target/venv), and axe-core
          for the browser test (target/axe-core)
  e2e     the end-to-end suite alone (a real gateway, the fake model, the CLI)
  hosts   the host rig's suite alone: gateways on separate network and PID namespaces
          sharing one PostgreSQL board (root; iproute2, util-linux, tini)
  soak    the reliability suites, long: 200 crash kills, 30 s of concurrent writers
  fuzz    each cargo-fuzz target for 60 s (or SECONDS): cargo xtask fuzz [SECONDS]
  mutants cargo-mutants over the board's decisions; fails on a survivor not explained in
          xtask/mutants-survivors.txt (outside CI: about 20 minutes on two cores)
  bench   release-mode benchmarks: table + target/bench/results.json
          (--scale 1m: 1k, 100k and 1M-task boards, target/bench/scale-1m.json)
          (--only store,contention,tick,cli,footprint,decomposition,postgres: some of them;
           --peer: vs Python Hermes)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("venv") => venv::ensure(),
        Some("sizes") => sizes::check(&workspace_root()),
        Some("purity") => purity::check(&workspace_root()),
        Some("deps") => deps::check(&workspace_root()),
        Some("e2e") => cli_suite("e2e"),
        Some("hosts") => cli_suite("several_gateways::apart"),
        Some("soak") => soak(),
        Some("fuzz") => fuzz(args.get(1).map(String::as_str)),
        Some("demo") => demo::run(&workspace_root()),
        Some("mutants") => mutants::run(),
        Some("bench") => bench::run(&workspace_root(), &args[1..]),
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

/// Where cargo puts what it builds: `CARGO_TARGET_DIR` (relative to the workspace) or
/// `target/`.
pub(crate) fn target_dir(root: &std::path::Path) -> std::path::PathBuf {
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), std::path::PathBuf::from);
    if target.is_relative() {
        root.join(target)
    } else {
        target
    }
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

/// One module of the CLI's test binary (`e2e`, `several_gateways::apart`): builds the binaries it drives,
/// then runs it.
fn cli_suite(module: &str) -> Result<(), String> {
    let cargo = cargo();
    if has_nextest() {
        let filter = format!("test(/^{module}::/)");
        run(
            &cargo,
            &[
                "nextest",
                "run",
                "-p",
                "cli",
                "--test",
                "cli",
                "-E",
                &filter,
                "--no-fail-fast",
            ],
        )
    } else {
        let prefix = format!("{module}::");
        run(
            &cargo,
            &[
                "test",
                "-p",
                "cli",
                "--test",
                "cli",
                "--no-fail-fast",
                "--",
                &prefix,
            ],
        )
    }
}

/// Formatting, lints, then every test: one build of the test profile, run in parallel.
/// The PostgreSQL suites need a server: without one, CI (`CI` set) fails at once, naming
/// the URL it tried; elsewhere they are skipped, saying so.
fn ci() -> Result<(), String> {
    let cargo = cargo();
    let server = pg::Server::from_env();
    let skip_postgres = match server.reachable() {
        Ok(()) => None,
        Err(why) if std::env::var_os("CI").is_some() => {
            return Err(format!(
                "PostgreSQL is unreachable at {} ({why}); CI runs the PostgreSQL suites, so it needs a server ({})",
                server.shown(),
                pg::URL_VAR
            ));
        }
        Err(why) => Some(format!(
            "xtask: PostgreSQL is unreachable at {} ({why}): the board-postgres and several_gateways suites are skipped; {}",
            server.shown(),
            pg::HINT
        )),
    };
    run(&cargo, &["fmt", "--all", "--", "--check"])?;
    sizes::check(&workspace_root())?;
    purity::check(&workspace_root())?;
    deps::check(&workspace_root())?;
    venv::ensure()?;
    run(
        &cargo,
        &["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"],
    )?;
    if let Some(skipped) = &skip_postgres {
        eprintln!("{skipped}");
    }
    if has_nextest() {
        let mut args = vec!["nextest", "run", "--workspace", "--no-fail-fast"];
        if skip_postgres.is_some() {
            args.extend([
                "-E",
                "not (package(board-postgres) | test(/^several_gateways::/))",
            ]);
        }
        run(&cargo, &args)?;
    } else {
        eprintln!("xtask: cargo-nextest not found; running cargo test");
        let mut args = vec!["test", "--workspace", "--no-fail-fast", "--all-targets"];
        if skip_postgres.is_some() {
            args.extend([
                "--exclude",
                "board-postgres",
                "--",
                "--skip",
                "several_gateways::",
            ]);
        }
        run(&cargo, &args)?;
    }
    run(&cargo, &["test", "--workspace", "--doc"])?;
    if let Some(skipped) = skip_postgres {
        eprintln!("{skipped}");
    }
    Ok(())
}

/// The reliability suites at soak strength: the crash harness with 200 kills,
/// the concurrent writers for 30 s, and the fault suites, figures printed.
fn soak() -> Result<(), String> {
    let cargo = cargo();
    let env = [("KANBAN_SOAK_KILLS", "200"), ("KANBAN_SOAK_WRITERS_SECS", "30")];
    // The CLI's suites are modules of its one test binary: one run per suite, in turn,
    // so the crash harness's kills and deadlines never share the machine with another
    // suite's gateways.
    let cli_suites = [
        "reliability_crash::",
        "reliability_model_faults::",
        "reliability_db_faults::",
        "reliability_secrets::",
    ];
    let mut suites: Vec<Vec<&str>> = cli_suites
        .iter()
        .map(|suite| vec!["test", "-p", "cli", "--test", "cli", "--", suite, "--nocapture"])
        .collect();
    suites.push(vec![
        "test",
        "-p",
        "board-sqlite",
        "--test",
        "reliability_writers",
        "--",
        "--nocapture",
    ]);
    for args in suites {
        eprintln!(
            "xtask: $ KANBAN_SOAK_KILLS=200 KANBAN_SOAK_WRITERS_SECS=30 {cargo} {}",
            args.join(" ")
        );
        let status = Command::new(&cargo)
            .args(&args)
            .envs(env)
            .current_dir(workspace_root())
            .status()
            .map_err(|e| format!("could not start {cargo}: {e}"))?;
        if !status.success() {
            return Err(format!("soak: `cargo {}` failed ({status})", args.join(" ")));
        }
    }
    Ok(())
}

/// Runs every cargo-fuzz target (the decomposer's reply parser, the config loader) for
/// `seconds` each (default 60). Needs a nightly toolchain and cargo-fuzz.
fn fuzz(seconds: Option<&str>) -> Result<(), String> {
    let seconds: u64 = match seconds {
        None => 60,
        Some(s) => s
            .parse()
            .map_err(|_| format!("fuzz: SECONDS must be a whole number, got {s:?}"))?,
    };
    let works = |args: &[&str]| {
        Command::new("cargo")
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !works(&["+nightly", "--version"]) {
        return Err(
            "fuzz needs a nightly toolchain (libFuzzer's sanitizer flags are nightly-only).\n\
                    install it with:  rustup toolchain install nightly"
                .to_owned(),
        );
    }
    if !works(&["+nightly", "fuzz", "--version"]) {
        return Err("fuzz needs cargo-fuzz.\n\
                    install it with:  cargo install cargo-fuzz\n\
                    (then `cargo xtask fuzz` runs each target for 60 s)"
            .to_owned());
    }
    let root = workspace_root();
    let max_time = format!("-max_total_time={seconds}");
    for (crate_dir, target) in [
        ("crates/decompose", "parse_reply"),
        ("crates/board-home", "config_parse"),
    ] {
        let args = ["+nightly", "fuzz", "run", target, "--", max_time.as_str()];
        eprintln!("xtask: (in {crate_dir}) $ cargo {}", args.join(" "));
        let status = Command::new("cargo")
            .args(args)
            .current_dir(root.join(crate_dir))
            .status()
            .map_err(|e| format!("could not start cargo: {e}"))?;
        if !status.success() {
            return Err(format!(
                "fuzz target {target} failed ({status}); the crashing input is under {crate_dir}/fuzz/artifacts/{target}/"
            ));
        }
    }
    Ok(())
}
