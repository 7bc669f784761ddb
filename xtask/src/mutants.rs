//! `cargo xtask mutants`: cargo-mutants over the board's decisions (the cost and lease
//! rules of board-core, the gateway's planner, the web board's guard), each crate's
//! mutants tested by that crate's fast tests, so the whole scope runs in under half an
//! hour on two cores. Outside CI: it builds the workspace once per mutant.
//!
//! A mutant no test catches either gets a test or a line in `xtask/mutants-survivors.txt`
//! (`file: mutation | why no test should catch it`); the run fails on a survivor that is
//! not listed, and on a listed one that is now caught (the list stays true).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::{cargo, workspace_root};

/// One crate's part of the scope: the files mutated and the tests that judge them.
struct Part {
    files: &'static [&'static str],
    /// nextest's filter of the crate's tests run against each mutant.
    tests: &'static str,
}

const SCOPE: &[Part] = &[
    Part {
        files: &[
            "crates/board-core/src/spend.rs",
            "crates/board-core/src/breaker.rs",
            "crates/board-core/src/backoff.rs",
            "crates/board-core/src/decomposition_lease.rs",
        ],
        // The unit tests and the in-memory conformance scenarios; the property test and
        // the thread races add minutes per mutant and no rule of these files.
        tests: "package(board-core) & (kind(lib) | (binary(memory_conformance) & not test(/invariants_hold_after_every_step|_race$|eight_threads/)))",
    },
    Part {
        files: &["crates/gateway/src/plan.rs"],
        // The planner's table and the tick with a recording process table.
        tests: "package(gateway) & (kind(lib) | test(/^plan_and_tick::/))",
    },
    Part {
        files: &["crates/web/src/guard.rs"],
        tests: "package(web) & (kind(lib) | binary(security) | binary(api))",
    },
];

const SURVIVORS: &str = "xtask/mutants-survivors.txt";

/// Seconds a mutant's tests may run before it counts as timed out (not as missed).
const TEST_TIMEOUT: &str = "30";

/// One cargo-mutants run over the whole scope: the tree is copied and built once, and
/// each mutant is tested by its own crate's tests only (cargo-mutants' default), of
/// which the union filter keeps that crate's part.
pub(crate) fn run() -> Result<(), String> {
    let root = workspace_root();
    let installed = Command::new(cargo())
        .args(["mutants", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed {
        return Err("cargo-mutants is not installed: `cargo install --locked cargo-mutants`".to_owned());
    }
    let known = known_survivors(&root)?;
    let out = root.join("target/mutants");
    // cargo-mutants makes `mutants.out` inside `--output` but not `--output` itself.
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let filter = SCOPE
        .iter()
        .map(|part| format!("({})", part.tests))
        .collect::<Vec<_>>()
        .join(" | ");
    // A mutant that makes a loop endless runs until the timeout. cargo-mutants' own is
    // several times the baseline test time, minutes for the three crates' tests; a
    // mutant's tests are its crate's alone, which pass in seconds. Two mutants at a
    // time, each in its own copy of the tree: one compiles while the other links and
    // runs its tests.
    let mut args: Vec<&str> = vec![
        "mutants",
        "--test-tool",
        "nextest",
        "--no-shuffle",
        "--timeout",
        TEST_TIMEOUT,
        "--jobs",
        "2",
    ];
    for file in SCOPE.iter().flat_map(|part| part.files) {
        args.extend(["--file", file]);
    }
    let out_str = out.to_str().ok_or("the target directory is not UTF-8")?;
    args.extend(["--output", out_str, "--", "-E", &filter]);
    eprintln!("xtask: $ cargo {}", args.join(" "));
    // cargo-mutants exits 2 when mutants were missed, 3 when some timed out: the lists
    // below say which.
    let status = Command::new(cargo())
        .args(&args)
        // No debug info in the copy's builds: each mutant relinks its crate's test
        // binaries, and that is most of a mutant's time.
        .env("CARGO_PROFILE_DEV_DEBUG", "0")
        .current_dir(&root)
        .status()
        .map_err(|e| format!("could not start cargo mutants: {e}"))?;
    if !matches!(status.code(), Some(0 | 2 | 3)) {
        return Err(format!("cargo mutants failed ({status})"));
    }
    let results = out.join("mutants.out");
    let missed = lines(&results.join("missed.txt"));
    let tested = ["caught.txt", "timeout.txt", "unviable.txt"]
        .iter()
        .map(|name| lines(&results.join(name)).len())
        .sum::<usize>()
        + missed.len();
    report(tested, &missed, &known)
}

/// What the scope's run found against the list of known survivors.
fn report(tested: usize, missed: &[String], known: &BTreeMap<String, String>) -> Result<(), String> {
    let keys: Vec<String> = missed.iter().map(|m| key(m)).collect();
    println!("mutants: {tested} tested, {} missed", missed.len());
    let mut unexplained = Vec::new();
    for (mutant, key) in missed.iter().zip(&keys) {
        match known.get(key) {
            Some(why) => println!("  missed (listed): {mutant}: {why}"),
            None => {
                println!("  MISSED: {mutant}");
                unexplained.push(mutant.clone());
            }
        }
    }
    let caught_now: Vec<&String> = known.keys().filter(|k| !keys.contains(k)).collect();
    for key in &caught_now {
        println!("  listed in {SURVIVORS} but caught now: {key}");
    }
    if unexplained.is_empty() && caught_now.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} mutants missed without a reason in {SURVIVORS}, {} listed there are caught now",
            unexplained.len(),
            caught_now.len()
        ))
    }
}

/// A mutant without its line and column, which move with every edit:
/// `crates/x/src/f.rs: replace a with b in f`.
fn key(mutant: &str) -> String {
    let mut parts = mutant.splitn(4, ':');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(file), Some(_line), Some(_col), Some(rest)) => format!("{file}:{rest}"),
        _ => mutant.to_owned(),
    }
}

/// `file: mutation | reason` lines; `#` starts a comment.
fn known_survivors(root: &Path) -> Result<BTreeMap<String, String>, String> {
    let path = root.join(SURVIVORS);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut known = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (mutant, why) = line
            .split_once(" | ")
            .ok_or_else(|| format!("{SURVIVORS}:{}: expected `file: mutation | reason`", n + 1))?;
        known.insert(mutant.trim().to_owned(), why.trim().to_owned());
    }
    Ok(known)
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mutant_is_known_by_its_file_and_mutation_not_its_position() {
        assert_eq!(
            key("crates/board-core/src/spend.rs:18:9: replace - with + in window_start"),
            "crates/board-core/src/spend.rs: replace - with + in window_start"
        );
    }

    #[test]
    fn an_unlisted_survivor_and_a_listed_mutant_now_caught_both_fail() {
        let known = BTreeMap::from([("a.rs: replace x".to_owned(), "why".to_owned())]);
        assert!(report(3, &["a.rs:1:2: replace x".to_owned()], &known).is_ok());
        assert!(report(3, &["b.rs:1:2: replace y".to_owned()], &known).is_err());
        assert!(report(3, &[], &known).is_err());
    }
}
