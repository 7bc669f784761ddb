//! `cargo xtask deps` (and a step of `ci`): no crate of the workspace declares a
//! dependency it does not use. A dependency under `[dependencies]` must be named in the
//! crate's `src/` or `build.rs` (as `name::`, `use name`, or `name!`); one under
//! `[dev-dependencies]` anywhere in the crate (its unit tests, `tests/`, `examples/`,
//! `benches/`). A dependency kept for a reason its code does not show (a feature it
//! turns on for another) says why on its line: `# used: ...`. The check reads text, as
//! `cargo machete` does; it runs on stable and in a second.

use std::path::{Path, PathBuf};

/// Every declared dependency no source of its crate names.
pub(crate) fn check(root: &Path) -> Result<(), String> {
    let mut manifests = vec![root.join("xtask/Cargo.toml")];
    let crates = std::fs::read_dir(root.join("crates")).map_err(|e| format!("reading crates/: {e}"))?;
    for entry in crates {
        let manifest = entry
            .map_err(|e| format!("reading crates/: {e}"))?
            .path()
            .join("Cargo.toml");
        if manifest.is_file() {
            manifests.push(manifest);
        }
    }
    manifests.sort();
    let mut unused = Vec::new();
    for manifest in &manifests {
        let text = read(manifest)?;
        let dir = manifest.parent().unwrap_or(root);
        let mut sources = String::new();
        for sub in ["src", "build.rs"] {
            gather(&dir.join(sub), &mut sources)?;
        }
        let mut everywhere = sources.clone();
        for sub in ["tests", "examples", "benches"] {
            gather(&dir.join(sub), &mut everywhere)?;
        }
        let shown = manifest
            .strip_prefix(root)
            .unwrap_or(manifest)
            .display()
            .to_string();
        for (section, name) in declared(&text) {
            let code = if section == "dev-dependencies" {
                &everywhere
            } else {
                &sources
            };
            if !named(code, &name) {
                unused.push(format!("{shown}: [{section}] {name}"));
            }
        }
    }
    if unused.is_empty() {
        eprintln!(
            "xtask: deps: {} manifests, every dependency used",
            manifests.len()
        );
        Ok(())
    } else {
        Err(format!(
            "deps: declared but never named in the crate (remove them, or say why on the line with `# used: ...`):\n  {}",
            unused.join("\n  ")
        ))
    }
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))
}

/// The text of every `.rs` file at or under `path` (nothing when there is none).
fn gather(path: &Path, out: &mut String) -> Result<(), String> {
    if path.is_file() {
        out.push_str(&read(path)?);
        out.push('\n');
        return Ok(());
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return Ok(());
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() || path.extension().is_some_and(|x| x == "rs") {
            gather(&path, out)?;
        }
    }
    Ok(())
}

/// The dependencies a manifest declares, with their section, those marked `# used:`
/// aside.
fn declared(manifest: &str) -> Vec<(String, String)> {
    let mut section = String::new();
    let mut found = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_owned();
            continue;
        }
        let wanted = ["dependencies", "dev-dependencies", "build-dependencies"];
        if !wanted.contains(&section.as_str()) || line.starts_with('#') || line.contains("# used:") {
            continue;
        }
        let key = line.split(['=', '.']).next().unwrap_or_default().trim();
        if !key.is_empty() {
            found.push((section.clone(), key.to_owned()));
        }
    }
    found
}

/// Whether `code` names the crate `name` (its package name, with `-` as `_` in code).
pub(crate) fn named(code: &str, name: &str) -> bool {
    let ident = name.replace('-', "_");
    let part_of_a_name = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    code.match_indices(ident.as_str()).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let rest = &code[at + ident.len()..];
        let used = rest.starts_with("::") || rest.starts_with('!') || code[..at].ends_with("use ");
        used && !part_of_a_name(before) && !part_of_a_name(rest.chars().next())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependencies_are_read_by_section_and_a_reason_exempts_one() {
        let manifest = "[package]\nname = \"x\"\n[dependencies]\nserde.workspace = true\nhyper-util = { version = \"0.1\" }\n\
                        tokio = \"1\" # used: turns on a feature of axum's\n[dev-dependencies]\n# a comment\ntempfile = \"3\"\n";
        assert_eq!(
            declared(manifest),
            [
                ("dependencies".to_owned(), "serde".to_owned()),
                ("dependencies".to_owned(), "hyper-util".to_owned()),
                ("dev-dependencies".to_owned(), "tempfile".to_owned()),
            ]
        );
    }

    #[test]
    fn a_crate_is_named_by_a_path_a_use_or_a_macro_but_not_inside_another_name() {
        assert!(named("let x = hyper_util::rt::TokioIo::new(s);", "hyper-util"));
        assert!(named("use serde::Serialize;", "serde"));
        assert!(named("let v = serde_json::json!({});", "serde_json"));
        assert!(named("tracing::warn!(\"x\");", "tracing"));
        assert!(
            !named("use serde_json::Value;", "serde"),
            "serde_json is not serde"
        );
        assert!(!named("let my_tokio::x = 1;", "tokio"));
        assert!(!named("nothing here", "libc"));
    }
}
