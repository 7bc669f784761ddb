//! The systemd unit `kanban gateway install` writes: its name (one per home) and its
//! text. Paths are untrusted text: each is checked to fit a unit file and quoted so that
//! systemd reads back exactly the path (no specifier, variable or escape is expanded).

use std::path::Path;

use super::{Scope, ServiceError};

/// The first line of every unit we write: a file without it is not ours to replace.
pub const MARKER: &str = "# Written by `kanban gateway install`; `kanban gateway uninstall` removes it.";

/// The line that records the unit's scope, read back by `uninstall`, `start`...
const SCOPE_LINE: &str = "# kanban-gateway-unit scope=";

/// How long systemd waits after SIGTERM before SIGKILL: the gateway's own shutdown
/// cancels model calls and finishes at most one tick's commit, well within this.
const STOP_TIMEOUT_SECONDS: u32 = 60;

/// The unit's name for the home at `home` (absolute): a readable part from the path and
/// a hash of the whole path, so two homes never share a unit and the name stays a valid
/// unit name (`[A-Za-z0-9_-]`, short) whatever the path holds.
pub fn unit_name(home: &Path) -> String {
    let text = home.as_os_str().as_encoded_bytes();
    let mut slug = String::new();
    for &byte in text {
        if byte.is_ascii_alphanumeric() || byte == b'_' {
            slug.push(char::from(byte));
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let slug = slug.trim_end_matches('-');
    // The path's tail says the most about which home it is.
    let start = slug.char_indices().rev().nth(39).map_or(0, |(i, _)| i);
    let slug = slug[start..].trim_start_matches('-');
    let hash = fnv1a(text);
    if slug.is_empty() {
        format!("kanban-gateway-{hash:08x}.service")
    } else {
        format!("kanban-gateway-{slug}-{hash:08x}.service")
    }
}

/// FNV-1a folded to 32 bits: stable across builds and platforms, unlike std's hasher.
fn fnv1a(bytes: &[u8]) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (hash ^ (hash >> 32)) as u32
}

/// What the unit runs and for whom.
pub struct UnitSpec<'a> {
    pub scope: Scope,
    /// The `kanban` binary's absolute path.
    pub exe: &'a Path,
    /// The home's absolute path.
    pub home: &'a Path,
    /// A system unit runs as the home's owner: `(uid, gid)`.
    pub owner: Option<(u32, u32)>,
}

/// The unit file's text.
pub fn render(spec: &UnitSpec<'_>) -> Result<String, ServiceError> {
    let exe = unit_text("the kanban binary's path", spec.exe)?;
    let home = unit_text("the home's path", spec.home)?;
    let command = |verb: &[&str]| {
        let mut words = vec![exec_word(exe), exec_word("--home"), exec_word(home)];
        words.extend(verb.iter().map(|w| exec_word(w)));
        words.join(" ")
    };
    let mut text = format!("{MARKER}\n{SCOPE_LINE}{}\n\n[Unit]\n", spec.scope.as_str());
    text.push_str(&format!(
        "Description=kanban gateway on \"{}\"\n",
        home.replace('%', "%%")
    ));
    if spec.scope == Scope::System {
        text.push_str("Wants=network-online.target\nAfter=network-online.target\n");
    }
    text.push_str("\n[Service]\nType=simple\n");
    if let Some((uid, gid)) = spec.owner {
        text.push_str(&format!("User={uid}\nGroup={gid}\n"));
    }
    text.push_str(&format!("ExecStart={}\n", command(&["gateway", "run"])));
    // `gateway reload` checks config.yaml first and refuses a broken one, so
    // `systemctl reload` fails instead of signalling for nothing.
    text.push_str(&format!("ExecReload={}\n", command(&["gateway", "reload"])));
    text.push_str(&format!(
        "Restart=on-failure\n\
         RestartSec=5\n\
         # SIGTERM: the gateway stops ticking, cancels its model calls and exits 0.\n\
         KillSignal=SIGTERM\n\
         TimeoutStopSec={STOP_TIMEOUT_SECONDS}\n\
         # Only the gateway is stopped: its workers keep running and the next gateway adopts them.\n\
         KillMode=process\n\
         \n[Install]\nWantedBy={}\n",
        match spec.scope {
            Scope::User => "default.target",
            Scope::System => "multi-user.target",
        }
    ));
    Ok(text)
}

/// The scope a unit file we wrote records; `None` for a file that is not ours.
pub fn written_scope(text: &str) -> Option<Scope> {
    let mut lines = text.lines();
    if lines.next() != Some(MARKER) {
        return None;
    }
    match lines.next()?.strip_prefix(SCOPE_LINE)? {
        "user" => Some(Scope::User),
        "system" => Some(Scope::System),
        _ => None,
    }
}

/// A path as UTF-8 without control characters: what a unit file line can carry.
fn unit_text<'a>(what: &str, path: &'a Path) -> Result<&'a str, ServiceError> {
    let text = path.to_str().ok_or_else(|| ServiceError::Unrepresentable {
        what: what.to_owned(),
        why: "it is not UTF-8".to_owned(),
    })?;
    if text.chars().any(char::is_control) {
        return Err(ServiceError::Unrepresentable {
            what: what.to_owned(),
            why: "it holds a control character (a newline, a tab...)".to_owned(),
        });
    }
    Ok(text)
}

/// One word of a systemd command line, read back verbatim: double-quoted, with `\` and
/// `"` escaped for the unquoting, `%` doubled against specifier expansion and `$`
/// doubled against variable expansion.
fn exec_word(word: &str) -> String {
    let mut out = String::with_capacity(word.len() + 2);
    out.push('"');
    for c in word.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            '$' => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_words_escape_quotes_backslashes_specifiers_and_variables() {
        assert_eq!(exec_word("/a b/c"), r#""/a b/c""#);
        assert_eq!(exec_word(r#"/x"y\z"#), r#""/x\"y\\z""#);
        assert_eq!(exec_word("/100%/$HOME/%h"), r#""/100%%/$$HOME/%%h""#);
    }

    #[test]
    fn unit_names_differ_by_home_and_stay_valid() {
        let a = unit_name(Path::new("/home/ana/.kanban"));
        let b = unit_name(Path::new("/home/ana/kanban"));
        assert!(a.starts_with("kanban-gateway-home-ana-kanban-"), "{a}");
        assert_ne!(a, b);
        let odd = unit_name(Path::new("/tmp/a b/%h/$X/é/\"q\""));
        assert!(
            odd.trim_end_matches(".service")
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'),
            "{odd}"
        );
        let long = unit_name(Path::new(&format!("/{}", "x/".repeat(200))));
        assert!(long.len() < 80, "{long}");
        assert_eq!(
            unit_name(Path::new("/")),
            format!("kanban-gateway-{:08x}.service", fnv1a(b"/"))
        );
    }

    #[test]
    fn a_path_a_unit_cannot_carry_is_refused() {
        let spec = UnitSpec {
            scope: Scope::User,
            exe: Path::new("/usr/bin/kanban"),
            home: Path::new("/tmp/a\nExecStartPre=/bin/evil"),
            owner: None,
        };
        let e = render(&spec).unwrap_err().to_string();
        assert!(e.contains("control character"), "{e}");
    }

    #[test]
    fn only_our_marker_with_a_scope_is_ours() {
        let spec = UnitSpec {
            scope: Scope::System,
            exe: Path::new("/usr/bin/kanban"),
            home: Path::new("/srv/kanban"),
            owner: Some((1000, 1000)),
        };
        let text = render(&spec).unwrap();
        assert_eq!(written_scope(&text), Some(Scope::System));
        assert_eq!(written_scope("[Unit]\nDescription=other\n"), None);
        assert_eq!(written_scope(&format!("{MARKER}\n[Unit]\n")), None);
    }
}
