//! How much the board keeps in one field, checked here for every way in (the CLI, a
//! worker's report channel, the web API, MCP, an import): whatever a surface lets
//! through, no store writes more. A surface may refuse earlier, with the configured cap
//! (`kanban.max_text_bytes`) and its own message; nothing is ever cut short silently.
//!
//! Short fields name things (an assignee, a profile, an author, a key): a small cap
//! keeps every table that lays them out linear and readable.

use serde_json::Value;

use crate::refusal::Refusal;

/// The most a long field holds, in bytes: a body, result, summary, heartbeat note, a
/// block, unblock or reclaim reason, a comment, a run's error, metadata (as JSON).
pub const TEXT_MAX_BYTES: usize = 1024 * 1024;

/// The most a short field holds, in bytes: an assignee, creator, comment author,
/// profile, idempotency key, host id, event kind.
pub const SHORT_MAX_BYTES: usize = 256;

/// Refuses a long field over [`TEXT_MAX_BYTES`].
pub fn text(what: &str, value: &str) -> Result<(), Refusal> {
    within(what, value.len(), TEXT_MAX_BYTES)
}

/// Refuses a short field over [`SHORT_MAX_BYTES`].
pub fn short(what: &str, value: &str) -> Result<(), Refusal> {
    within(what, value.len(), SHORT_MAX_BYTES)
}

/// Refuses JSON whose text is over [`TEXT_MAX_BYTES`], measured without building it.
pub fn json(what: &str, value: &Value) -> Result<(), Refusal> {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            if self.0 > TEXT_MAX_BYTES {
                return Err(std::io::Error::other("over"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    let _ = serde_json::to_writer(&mut counter, value);
    within(what, counter.0, TEXT_MAX_BYTES)
}

/// [`text`] of an optional field.
pub fn some_text(what: &str, value: &Option<String>) -> Result<(), Refusal> {
    value.as_deref().map_or(Ok(()), |v| text(what, v))
}

/// [`short`] of an optional field.
pub fn some_short(what: &str, value: &Option<String>) -> Result<(), Refusal> {
    value.as_deref().map_or(Ok(()), |v| short(what, v))
}

/// The most verifiers a task or a profile names.
pub const STEPS_MAX: usize = 16;

/// Refuses verifiers that are no argv lists the gateway can run: more than
/// [`STEPS_MAX`], an empty list, an empty program, a NUL byte (which no argv element
/// can hold), or more than [`TEXT_MAX_BYTES`] in all.
pub fn steps(what: &str, steps: &[Vec<String>]) -> Result<(), Refusal> {
    if steps.len() > STEPS_MAX {
        return Err(Refusal::Invalid(format!(
            "{what} name {} commands, over the board's limit of {STEPS_MAX}",
            steps.len()
        )));
    }
    let mut bytes = 0usize;
    for argv in steps {
        if argv.first().is_none_or(|program| program.is_empty()) {
            return Err(Refusal::Invalid(format!(
                "{what}: each command is a non-empty argv list whose first element names the program"
            )));
        }
        if argv.iter().any(|arg| arg.contains('\0')) {
            return Err(Refusal::Invalid(format!("{what}: an argument holds a NUL byte")));
        }
        bytes = argv.iter().fold(bytes, |n, arg| n.saturating_add(arg.len()));
    }
    within(what, bytes, TEXT_MAX_BYTES)
}

/// Refuses a name (a tenant) that is blank, over [`SHORT_MAX_BYTES`] or holds a control
/// character: names are shown in tables and handed to workers in their environment.
pub fn name(what: &str, value: &str) -> Result<(), Refusal> {
    if value.trim().is_empty() || value.chars().any(char::is_control) {
        return Err(Refusal::Invalid(format!(
            "{what} is a name: not blank, no control characters"
        )));
    }
    short(what, value)
}

/// [`name`] of an optional field.
pub fn some_name(what: &str, value: &Option<String>) -> Result<(), Refusal> {
    value.as_deref().map_or(Ok(()), |v| name(what, v))
}

/// Refuses a task's own failure limit below 1 (1 gives up on the first failure).
pub fn retries(max_retries: Option<i64>) -> Result<(), Refusal> {
    match max_retries {
        Some(n) if n < 1 => Err(Refusal::Invalid(format!(
            "max retries must be at least 1 (1 gives up on the first failure), got {n}"
        ))),
        _ => Ok(()),
    }
}

/// The most skills a task names.
pub const SKILLS_MAX: usize = 16;

/// A task's skills as stored: trimmed, blanks and repeats dropped, in order. Refuses
/// more than [`SKILLS_MAX`] and a name that is not one plain word of letters, digits,
/// `-`, `_`, `.`, `:` and `/` (so no comma-joined list, no flag, nothing a worker's
/// command line or environment could read as more than one name), at most 64 bytes.
pub fn skills(names: &[String]) -> Result<Vec<String>, Refusal> {
    let mut kept: Vec<String> = Vec::new();
    for raw in names {
        let skill = raw.trim();
        if skill.is_empty() || kept.iter().any(|k| k == skill) {
            continue;
        }
        let plain = skill.len() <= 64
            && !skill.starts_with(['-', '.', '/'])
            && skill
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '/'));
        if !plain {
            return Err(Refusal::Invalid(format!(
                "a skill is one name of letters, digits, '-', '_', '.', ':' or '/' (at most 64 bytes, not starting with '-', '.' or '/'), got {:?}; repeat --skill for several",
                skill.chars().take(80).collect::<String>()
            )));
        }
        kept.push(skill.to_owned());
    }
    if kept.len() > SKILLS_MAX {
        return Err(Refusal::Invalid(format!(
            "a task names at most {SKILLS_MAX} skills, got {}",
            kept.len()
        )));
    }
    Ok(kept)
}

fn within(what: &str, bytes: usize, max: usize) -> Result<(), Refusal> {
    if bytes <= max {
        return Ok(());
    }
    let shown = if bytes > max.saturating_mul(2) {
        format!("over {} bytes", max.saturating_mul(2))
    } else {
        format!("{bytes} bytes")
    };
    Err(Refusal::Invalid(format!(
        "{what} is {shown}, over the board's {max}-byte limit for it"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cap_admits_its_size_and_refuses_one_byte_more() {
        assert!(text("the body", &"x".repeat(TEXT_MAX_BYTES)).is_ok());
        let e = text("the body", &"x".repeat(TEXT_MAX_BYTES + 1)).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "invalid request: the body is {} bytes, over the board's {TEXT_MAX_BYTES}-byte limit for it",
                TEXT_MAX_BYTES + 1
            )
        );
        assert!(short("the assignee", &"a".repeat(SHORT_MAX_BYTES)).is_ok());
        assert!(short("the assignee", &"a".repeat(SHORT_MAX_BYTES + 1)).is_err());
        let big = Value::String("m".repeat(TEXT_MAX_BYTES));
        assert!(json("the metadata", &big).is_err(), "quotes count too");
        assert!(json("the metadata", &Value::String("m".repeat(TEXT_MAX_BYTES - 2))).is_ok());
        assert!(some_short("the key", &None).is_ok());
    }

    #[test]
    fn a_task_names_up_to_sixteen_plain_skills_once_each() {
        let names = |n: usize| (0..n).map(|i| format!("skill-{i}")).collect::<Vec<_>>();
        assert_eq!(skills(&names(SKILLS_MAX)).unwrap().len(), SKILLS_MAX);
        assert!(skills(&names(SKILLS_MAX + 1)).is_err());
        let messy = [" a ", "a", "", "b.c:d/e_f"].map(String::from);
        assert_eq!(skills(&messy).unwrap(), ["a", "b.c:d/e_f"]);
        for bad in ["-x", ".x", "/x", "a,b", "a b", "é", &"x".repeat(65)] {
            assert!(skills(&[bad.to_owned()]).is_err(), "{bad:?}");
        }
        assert!(skills(&["x".repeat(64)]).is_ok());
        assert!(name("the tenant", "acme").is_ok());
        for bad in ["", "  ", "a\u{7}b", &"t".repeat(SHORT_MAX_BYTES + 1)] {
            assert!(name("the tenant", bad).is_err(), "{bad:?}");
        }
    }
}
