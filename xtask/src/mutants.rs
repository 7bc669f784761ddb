//! `cargo xtask mutants`: cargo-mutants over the board's decisions (the cost and lease
//! rules of board-core, the gateway's planner, the web board's guard), each crate's
//! mutants tested by that crate's fast tests. Outside CI.
//!
//! A mutant no test catches either gets a test or a line in `xtask/mutants-survivors.txt`
//! (`file: mutation | why no test should catch it`); the run fails on a survivor that is
//! not listed, and on a listed one that is now caught (the list stays true).
//!
//! Where the time goes, and how it is kept under half an hour on two cores: a mutant
//! costs one incremental build of its crate's test binaries (2 to 7 s) and a second of
//! tests, but cargo-mutants' own copies start from an empty `target/` (minutes each),
//! and building one package alone unifies its dependencies' features differently from
//! the workspace, so each switch of package rebuilds dependencies. Here the tree is
//! mirrored into `target/mutants/tree-N` (unchanged files keep their times) with a
//! `target/` of its own that outlives the run, and each mirror tests half of every
//! part's mutants in place (`--shard`), two mirrors at once: after the first run every
//! build is incremental.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Instant;

use crate::{cargo, workspace_root};

/// One crate's part of the scope: the files mutated and the tests that judge them.
struct Part {
    name: &'static str,
    files: &'static [&'static str],
    /// The test targets built for each mutant (cargo's target selection).
    targets: &'static [&'static str],
    /// nextest's filter of those targets' tests run against each mutant.
    tests: &'static str,
    /// The packages whose tests judge the mutants (none: the mutated file's own).
    test_packages: &'static [&'static str],
}

const SCOPE: &[Part] = &[
    Part {
        name: "board-core",
        files: &[
            "crates/board-core/src/spend.rs",
            "crates/board-core/src/breaker.rs",
            "crates/board-core/src/backoff.rs",
            "crates/board-core/src/decomposition_lease.rs",
        ],
        targets: &["--lib", "--test", "memory_conformance"],
        // The unit tests and the in-memory conformance scenarios; the property test and
        // the thread races add minutes per mutant and no rule of these files.
        tests: "kind(lib) | not test(/invariants_hold_after_every_step|_race$|eight_threads/)",
        test_packages: &[],
    },
    Part {
        name: "gateway",
        files: &[
            "crates/gateway/src/planner.rs",
            "crates/gateway/src/planner/budget.rs",
        ],
        targets: &["--lib", "--test", "gateway"],
        // The planner's table and the tick with a recording process table.
        tests: "kind(lib) | test(/^plan_and_tick::/)",
        test_packages: &[],
    },
    Part {
        name: "http-guard",
        files: &["crates/http-guard/src/guard.rs"],
        // The guard's unit tests, and the web board's security and API suites, which
        // reach it over HTTP.
        targets: &["--lib", "--test", "security", "--test", "api"],
        tests: "all()",
        test_packages: &["http-guard", "web"],
    },
];

const SURVIVORS: &str = "xtask/mutants-survivors.txt";

/// Seconds a mutant's tests may run before it counts as timed out (not as missed); a
/// mutant's tests pass in about a second.
const TEST_TIMEOUT: &str = "30";

/// Mirrors run at once, each on its own shard of every part: one per core.
const MIRRORS: usize = 2;

/// What one finished run found, summed over mirrors and parts.
#[derive(Default)]
struct Found {
    missed: Vec<String>,
    tested: usize,
}

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
    let started = Instant::now();
    let files = tracked_files(&root)?;
    let base = root.join("target/mutants");
    let mirrors: Vec<PathBuf> = (0..MIRRORS).map(|n| base.join(format!("tree-{n}"))).collect();
    for mirror in &mirrors {
        mirror_tree(&root, mirror, &files)?;
    }
    let mut running: Vec<(PathBuf, Child)> = Vec::new();
    for (shard, mirror) in mirrors.iter().enumerate() {
        let script = shard_script(shard, &base)?;
        eprintln!("xtask: mirror {shard}: {script}");
        let child = Command::new("sh")
            .args(["-c", &script])
            // No debug info in the mirrors' builds: each mutant relinks its crate's test
            // binaries, and that is most of a mutant's time.
            .env("CARGO_PROFILE_DEV_DEBUG", "0")
            .env_remove("CARGO_TARGET_DIR")
            .current_dir(mirror)
            .spawn()
            .map_err(|e| format!("could not start cargo mutants: {e}"))?;
        running.push((mirror.clone(), child));
    }
    for (mirror, mut child) in running {
        let status = child
            .wait()
            .map_err(|e| format!("waiting for cargo mutants: {e}"))?;
        if !status.success() {
            return Err(format!("cargo mutants failed in {} ({status})", mirror.display()));
        }
    }
    let mut found = Found::default();
    for shard in 0..MIRRORS {
        for part in SCOPE {
            let results = out_dir(&base, part, shard).join("mutants.out");
            let missed = lines(&results.join("missed.txt"));
            found.tested += ["caught.txt", "timeout.txt", "unviable.txt"]
                .iter()
                .map(|name| lines(&results.join(name)).len())
                .sum::<usize>()
                + missed.len();
            found.missed.extend(missed);
        }
    }
    found.missed.sort();
    println!(
        "mutants: {:.1} min in all",
        started.elapsed().as_secs_f64() / 60.0
    );
    report(found.tested, &found.missed, &known)
}

fn out_dir(base: &Path, part: &Part, shard: usize) -> PathBuf {
    base.join(format!("out-{}-{shard}", part.name))
}

/// The shell commands one mirror runs: each part's shard in turn. cargo-mutants exits
/// 2 when mutants were missed and 3 when some timed out (the lists say which), so only
/// other codes stop the mirror.
fn shard_script(shard: usize, base: &Path) -> Result<String, String> {
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let mut steps = Vec::new();
    for part in SCOPE {
        let out = out_dir(base, part, shard);
        std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
        let out = out
            .to_str()
            .ok_or("the target directory is not UTF-8")?
            .to_owned();
        let mut args: Vec<String> = [
            "mutants",
            "--in-place",
            "--test-tool",
            "nextest",
            "--no-shuffle",
            "--timeout",
            TEST_TIMEOUT,
            "--shard",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        args.push(format!("{shard}/{MIRRORS}"));
        for file in part.files {
            args.extend(["--file".to_owned(), (*file).to_owned()]);
        }
        for package in part.test_packages {
            args.extend(["--test-package".to_owned(), (*package).to_owned()]);
        }
        if !part.test_packages.is_empty() {
            // cargo-mutants runs its baseline on the mutated package alone, whatever
            // --test-package says, so the other packages' targets would fail it.
            args.push("--baseline=skip".to_owned());
        }
        args.extend(["--output".to_owned(), out, "--".to_owned()]);
        args.extend(part.targets.iter().map(|t| (*t).to_owned()));
        args.extend(["-E".to_owned(), part.tests.to_owned()]);
        let command: Vec<String> = std::iter::once(cargo()).chain(args).map(|a| quote(&a)).collect();
        steps.push(format!(
            "{{ {}; code=$?; [ $code -eq 0 ] || [ $code -eq 2 ] || [ $code -eq 3 ]; }}",
            command.join(" ")
        ));
    }
    Ok(steps.join(" && "))
}

/// The files git would commit: tracked ones and new ones not ignored.
fn tracked_files(root: &Path) -> Result<Vec<PathBuf>, String> {
    let out = Command::new("git")
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .current_dir(root)
        .output()
        .map_err(|e| format!("git ls-files: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git ls-files failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out
        .stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| PathBuf::from(String::from_utf8_lossy(p).into_owned()))
        .filter(|p| root.join(p).is_file())
        .collect())
}

/// Makes `mirror` hold exactly `files` of `root`: a file whose bytes are unchanged is
/// left alone (its time too, so cargo rebuilds only what changed), others are written,
/// and files the tree no longer has are removed. `mirror/target` is the mirror's own.
fn mirror_tree(root: &Path, mirror: &Path, files: &[PathBuf]) -> Result<(), String> {
    let fail = |path: &Path, e: std::io::Error| format!("{}: {e}", path.display());
    for file in files {
        let from = root.join(file);
        let to = mirror.join(file);
        let bytes = std::fs::read(&from).map_err(|e| fail(&from, e))?;
        if std::fs::read(&to).is_ok_and(|old| old == bytes) {
            continue;
        }
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).map_err(|e| fail(dir, e))?;
        }
        std::fs::write(&to, &bytes).map_err(|e| fail(&to, e))?;
    }
    let keep: BTreeSet<PathBuf> = files.iter().cloned().collect();
    remove_others(mirror, Path::new(""), &keep)
}

fn remove_others(mirror: &Path, relative: &Path, keep: &BTreeSet<PathBuf>) -> Result<(), String> {
    let dir = mirror.join(relative);
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        let path = relative.join(entry.file_name());
        if path == Path::new("target") {
            continue;
        }
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_others(mirror, &path, keep)?;
        } else if !keep.contains(&path) {
            let full = mirror.join(&path);
            std::fs::remove_file(&full).map_err(|e| format!("{}: {e}", full.display()))?;
        }
    }
    Ok(())
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
