//! `cargo xtask purity` (and a step of `ci`): the decisions cannot touch the world.
//! `board-core` (its state machine, rules and the in-memory store) and the gateway's
//! planner (`gateway/src/planner.rs` and `planner/`) name no clock, file system, process,
//! thread, socket, environment, randomness or async runtime: time and ids come in as
//! arguments (a retention batch gets its clock from the caller). The planner is a leaf:
//! of the workspace it names only `board_core` and its own modules, never the
//! dispatcher, the supervisor or the home. Comments and the `#[cfg(test)]` module at a
//! file's end are not read; the conformance suite, a test harness run against every
//! store, is not part of the core, nor are the planner's table tests.

use std::path::{Path, PathBuf};

/// What the world looks like in source text.
const WORLD: &[&str] = &[
    "Instant::now",
    "SystemTime",
    "std::fs",
    "std::process",
    "std::thread",
    "std::net",
    "std::env",
    "std::io::stdin",
    "std::io::stdout",
    "tokio",
    "async fn",
    ".await",
    "getrandom",
    "libc::",
];

/// Every line of the pure sources under `root` that names the world.
pub(crate) fn check(root: &Path) -> Result<(), String> {
    let mut files = Vec::new();
    rust_files(&root.join("crates/board-core/src"), &mut files)
        .map_err(|e| format!("reading board-core: {e}"))?;
    let mut planner = vec![root.join("crates/gateway/src/planner.rs")];
    rust_files(&root.join("crates/gateway/src/planner"), &mut planner)
        .map_err(|e| format!("reading the planner: {e}"))?;
    files.extend(planner.iter().cloned());
    let ours = workspace_crates(root)?;
    files.sort();
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|e| format!("reading {}: {e}", file.display()))?;
        let shown = file.strip_prefix(root).unwrap_or(file).display().to_string();
        let mut lines = worldly(&text);
        if planner.contains(file) {
            lines.extend(outside_the_planner(&text, &ours));
        }
        found.extend(lines.into_iter().map(|(n, line)| format!("{shown}:{n}: {line}")));
    }
    if found.is_empty() {
        eprintln!(
            "xtask: purity: {} files of decisions, none touching the world",
            files.len()
        );
        Ok(())
    } else {
        Err(format!(
            "purity: the core and the planner take the world as arguments; these name it:\n  {}",
            found.join("\n  ")
        ))
    }
}

/// The lines of a planner file before its tests that reach past the planner: a path
/// into the gateway but `crate::planner`, or a crate of the workspace (`ours`, by the
/// names code gives them) but `board_core`.
fn outside_the_planner(text: &str, ours: &[String]) -> Vec<(usize, String)> {
    code_lines(text)
        .filter(|(_, code, _)| {
            let gateway = code
                .match_indices("crate::")
                .any(|(at, m)| !code[at + m.len()..].starts_with("planner"));
            gateway
                || ours
                    .iter()
                    .any(|name| name != "board_core" && crate::deps::named(code, name))
        })
        .map(|(n, _, line)| (n, line))
        .collect()
}

/// The crates of the workspace, as code names them (`board-home` is `board_home`).
fn workspace_crates(root: &Path) -> Result<Vec<String>, String> {
    let dir = root.join("crates");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
    let names = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("Cargo.toml").is_file());
    Ok(names
        .map(|e| e.file_name().to_string_lossy().replace('-', "_"))
        .collect())
}

/// The `.rs` files under `dir`, the conformance suite and the planner's tests aside.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type()?.is_dir() {
            if name != "conformance" && name != "tests" {
                rust_files(&path, out)?;
            }
        } else if name.ends_with(".rs") && name != "conformance.rs" && name != "tests.rs" {
            out.push(path);
        }
    }
    Ok(())
}

/// The lines (1-based, trimmed) of `text` before its `#[cfg(test)]` module that name the
/// world outside a comment.
fn worldly(text: &str) -> Vec<(usize, String)> {
    code_lines(text)
        .filter(|(_, code, _)| WORLD.iter().any(|w| code.contains(w)))
        .map(|(n, _, line)| (n, line))
        .collect()
}

/// Each line before the `#[cfg(test)]` module: its number (1-based), its code (what
/// precedes a `//`) and the whole line, trimmed.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str, String)> {
    text.lines()
        .enumerate()
        .take_while(|(_, line)| line.trim() != "#[cfg(test)]")
        .map(|(n, line)| {
            (
                n + 1,
                line.split("//").next().unwrap_or_default(),
                line.trim().to_owned(),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_world_is_found_in_code_but_not_in_comments_or_tests() {
        let text = "use std::time::Instant;\n/// reads `Instant::now` nowhere\nfn f() { let t = Instant::now(); }\n\
                    fn g() { std::fs::read(\"x\"); } // std::fs\n#[cfg(test)]\nmod tests { fn h() { Instant::now(); } }\n";
        let found: Vec<usize> = worldly(text).into_iter().map(|(n, _)| n).collect();
        assert_eq!(found, [3, 4]);
    }

    #[test]
    fn the_planner_reaching_the_dispatcher_or_the_home_is_found() {
        let text =
            "use board_core::Task;\nuse crate::planner::exit::Ending;\nuse crate::dispatcher::TickReport;\n\
                    // crate::supervisor in a comment\nfn f(h: &board_home::Home) {}\n";
        let ours = ["board_core".to_owned(), "board_home".to_owned(), "web".to_owned()];
        let found: Vec<usize> = outside_the_planner(text, &ours)
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(found, [3, 5]);
    }
}
