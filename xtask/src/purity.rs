//! `cargo xtask purity` (and a step of `ci`): the decisions cannot touch the world.
//! `board-core` (its state machine, rules and the in-memory store) and the gateway's
//! planner (`gateway/src/plan.rs`) name no clock, file system, process, thread, socket,
//! environment, randomness or async runtime: time and ids come in as arguments (a
//! retention batch gets its clock from the caller). Comments and the `#[cfg(test)]`
//! module at a file's end are not read; the conformance suite, a test harness run
//! against every store, is not part of the core.

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
    files.push(root.join("crates/gateway/src/plan.rs"));
    files.sort();
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|e| format!("reading {}: {e}", file.display()))?;
        let shown = file.strip_prefix(root).unwrap_or(file).display().to_string();
        found.extend(
            worldly(&text)
                .into_iter()
                .map(|(n, line)| format!("{shown}:{n}: {line}")),
        );
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

/// The `.rs` files under `dir`, the conformance suite aside.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type()?.is_dir() {
            if name != "conformance" {
                rust_files(&path, out)?;
            }
        } else if name.ends_with(".rs") && name != "conformance.rs" {
            out.push(path);
        }
    }
    Ok(())
}

/// The lines (1-based, trimmed) of `text` before its `#[cfg(test)]` module that name the
/// world outside a comment.
fn worldly(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .take_while(|(_, line)| line.trim() != "#[cfg(test)]")
        .filter_map(|(n, line)| {
            let code = line.split("//").next().unwrap_or_default();
            WORLD
                .iter()
                .any(|w| code.contains(w))
                .then(|| (n + 1, line.trim().to_owned()))
        })
        .collect()
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
}
