//! `cargo xtask sizes` (and a step of `ci`): no source file outside the tests is longer
//! than 600 lines and no function longer than 80, unless a `// size:` comment says why
//! (at the top of the file, or in the comments just above the function).
//!
//! Functions are found the way rustfmt lays them out: a line opening `fn` and the first
//! later line that is its indentation followed by `}`.

use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 600;
const MAX_FN_LINES: usize = 80;
const WHY: &str = "// size:";

/// Every oversized file and function under `root`'s crates and xtask, one line each.
pub(crate) fn check(root: &Path) -> Result<(), String> {
    let mut files = Vec::new();
    for dir in ["crates", "xtask"] {
        sources(&root.join(dir), &mut files).map_err(|e| format!("reading {dir}: {e}"))?;
    }
    files.sort();
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|e| format!("reading {}: {e}", file.display()))?;
        let shown = file.strip_prefix(root).unwrap_or(file).display().to_string();
        found.extend(oversized(&text).into_iter().map(|o| format!("{shown}: {o}")));
    }
    if found.is_empty() {
        eprintln!(
            "xtask: sizes: {} files, none over {MAX_FILE_LINES} lines or with a function over {MAX_FN_LINES}",
            files.len()
        );
        Ok(())
    } else {
        Err(format!(
            "sizes: split these, or say why in a `{WHY}` comment:\n  {}",
            found.join("\n  ")
        ))
    }
}

/// The `.rs` files that are not tests: not under `tests/`, `benches/`, `fuzz/`,
/// `target/` or the conformance suite, and not a `tests.rs` module.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type()?.is_dir() {
            if !["tests", "benches", "fuzz", "target", "conformance", "snapshots"].contains(&name.as_str()) {
                sources(&path, out)?;
            }
        } else if name.ends_with(".rs") && name != "tests.rs" && name != "conformance.rs" {
            out.push(path);
        }
    }
    Ok(())
}

/// What is too long in one file's text, ignoring its `#[cfg(test)]` module at the end.
fn oversized(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .windows(2)
        .position(|w| w[0].starts_with("#[cfg(test)]") && w[1].starts_with("mod "))
        .unwrap_or(lines.len());
    let lines = &lines[..end];
    let mut found = Vec::new();
    let file_says_why = lines
        .iter()
        .take_while(|l| l.starts_with("//"))
        .any(|l| l.contains(WHY));
    if lines.len() > MAX_FILE_LINES && !file_says_why {
        found.push(format!("{} lines", lines.len()));
    }
    for (at, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else { continue };
        let indent = &line[..line.len() - line.trim_start().len()];
        if line.trim_end().ends_with('}') || is_declaration(&lines[at..]) {
            continue;
        }
        let close = format!("{indent}}}");
        let Some(length) = lines[at..].iter().position(|l| *l == close).map(|i| i + 1) else {
            continue;
        };
        let says_why = lines[..at]
            .iter()
            .rev()
            .take_while(|l| l.trim_start().starts_with("//") || l.trim_start().starts_with("#["))
            .any(|l| l.contains(WHY));
        if length > MAX_FN_LINES && !says_why {
            found.push(format!("fn {name} (line {}): {length} lines", at + 1));
        }
    }
    found
}

/// Whether the signature starting the lines ends in `;` (a trait method without a
/// default body) before it opens a body with `{`.
fn is_declaration(lines: &[&str]) -> bool {
    lines
        .iter()
        .map(|l| l.trim_end())
        .find(|l| l.ends_with('{') || l.ends_with(';'))
        .is_some_and(|l| l.ends_with(';'))
}

/// The name of the function a line opens, if it opens one.
fn fn_name(line: &str) -> Option<&str> {
    let mut words = line.split_whitespace().peekable();
    while let Some(word) = words.peek() {
        if word.starts_with("pub") || ["const", "async", "unsafe", "extern", "\"C\""].contains(word) {
            words.next();
        } else {
            break;
        }
    }
    if words.next()? != "fn" {
        return None;
    }
    let rest = words.next()?;
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(name: &str, lines: usize, indent: &str) -> String {
        let mut text = format!("{indent}pub(crate) fn {name}(x: u8) -> u8 {{\n");
        for _ in 0..lines - 2 {
            text.push_str(&format!("{indent}    let _ = x;\n"));
        }
        text.push_str(&format!("{indent}}}\n"));
        text
    }

    #[test]
    fn a_long_function_is_found_and_a_short_one_is_not() {
        let text = format!("{}{}", body("long", 81, ""), body("short", 80, "    "));
        assert_eq!(oversized(&text), vec!["fn long (line 1): 81 lines".to_owned()]);
    }

    #[test]
    fn a_comment_saying_why_excuses_it() {
        let text = format!(
            "// size: one table of cases\n#[allow(x)]\n{}",
            body("long", 90, "")
        );
        assert!(oversized(&text).is_empty());
    }

    #[test]
    fn a_long_file_is_found_but_not_its_tests() {
        let long = "const A: u8 = 1;\n".repeat(601);
        assert_eq!(oversized(&long), vec!["601 lines".to_owned()]);
        let tested = format!(
            "{}#[cfg(test)]\nmod tests {{\n{}}}\n",
            "const A: u8 = 1;\n".repeat(600),
            long
        );
        assert!(oversized(&tested).is_empty());
        let excused = format!("//! A table.\n//! size: generated\n{long}");
        assert_eq!(oversized(&excused).len(), 1, "only `// size:` excuses");
        assert!(oversized(&format!("// size: one table\n{long}")).is_empty());
    }

    #[test]
    fn one_line_functions_and_declarations_are_not_bodies() {
        assert_eq!(fn_name("    pub const fn new() -> Self {"), Some("new"));
        assert_eq!(fn_name("fn send(&self) -> u8;"), Some("send"));
        assert_eq!(fn_name("let f = fn_name(x);"), None);
        assert!(oversized("fn a() {}\nfn b();\n").is_empty());
        let trait_body = format!(
            "trait T {{\n    fn declared(\n        &self,\n    ) -> u8;\n{}}}\n",
            body("short", 80, "    ")
        );
        assert!(oversized(&trait_body).is_empty(), "{:?}", oversized(&trait_body));
    }
}
