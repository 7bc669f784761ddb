//! The gateway as a systemd unit: the unit file's text (snapshot), install twice,
//! uninstall, a unit file we did not write, and `start`, `stop`, `restart` and `status`
//! driving a fake `systemctl` that records its arguments, with systemd present and absent.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{Board, KANBAN};

/// A board whose unit directory and `systemctl` are the test's own.
struct Service {
    board: Board,
    units: tempfile::TempDir,
    bin: tempfile::TempDir,
}

/// A `systemctl` that appends its arguments, one call a line, to `calls` beside it, and
/// answers `is-active` and `is-enabled` as systemd would for a running, enabled unit.
const FAKE_SYSTEMCTL: &str = r#"#!/bin/sh
printf '%s\n' "$*" >> "$(dirname "$0")/calls"
for arg in "$@"; do
  case "$arg" in
    is-active) echo active ;;
    is-enabled) echo enabled ;;
  esac
done
exit 0
"#;

impl Service {
    fn new() -> Service {
        let board = Board::init();
        let bin = tempfile::tempdir().unwrap();
        let fake = bin.path().join("systemctl");
        std::fs::write(&fake, FAKE_SYSTEMCTL).unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        Service {
            board,
            units: tempfile::tempdir().unwrap(),
            bin,
        }
    }

    /// `kanban --home HOME ARGS` with systemd `present` or `absent`.
    fn run(&self, systemd: &str, args: &[&str]) -> std::process::Output {
        let path = format!(
            "{}:{}",
            self.bin.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        self.board
            .kanban(args)
            .env("KANBAN_SYSTEMD_UNIT_DIR", self.units.path())
            .env("KANBAN_TEST_SYSTEMD", systemd)
            .env("PATH", path)
            .output()
            .unwrap()
    }

    fn ok(&self, systemd: &str, args: &[&str]) -> String {
        let out = self.run(systemd, args);
        assert!(
            out.status.success(),
            "kanban {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn refused(&self, systemd: &str, args: &[&str]) -> String {
        let out = self.run(systemd, args);
        assert_eq!(out.status.code(), Some(1), "kanban {args:?} should be refused");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        stderr
    }

    /// The systemctl calls so far, one a line, then forgotten.
    fn calls(&self) -> Vec<String> {
        let path = self.bin.path().join("calls");
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let _ = std::fs::remove_file(&path);
        text.lines().map(str::to_owned).collect()
    }

    fn unit_files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.units.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        files
    }

    fn installed(&self, systemd: &str, args: &[&str]) -> (Value, String) {
        let mut all = vec!["gateway", "install", "--json"];
        all.extend_from_slice(args);
        let done: Value = serde_json::from_str(&self.ok(systemd, &all)).unwrap();
        let name = done["name"].as_str().unwrap().to_owned();
        (done, name)
    }
}

fn normalised(text: &str, home: &Path) -> String {
    text.replace(KANBAN, "[kanban]")
        .replace(&home.display().to_string(), "[home]")
}

#[test]
fn install_writes_one_unit_per_home_and_twice_changes_nothing() {
    let s = Service::new();
    let (done, name) = s.installed("present", &[]);
    assert_eq!(
        (done["scope"].as_str(), done["written"].as_bool()),
        (Some("user"), Some(true))
    );
    assert!(
        name.starts_with("kanban-gateway-") && name.ends_with(".service"),
        "{name}"
    );
    assert_eq!(
        s.calls(),
        ["--user daemon-reload".to_owned(), format!("--user enable {name}")]
    );
    let path = s.units.path().join(&name);
    let text = std::fs::read_to_string(&path).unwrap();
    insta::with_settings!({prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("gateway_unit_user", normalised(&text, &s.board.home()));
    });

    let (again, _) = s.installed("present", &[]);
    assert_eq!(again["written"], false);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    assert_eq!(s.unit_files(), std::slice::from_ref(&path));
    s.calls();

    // Another home gets its own unit beside the first.
    let other = Board::init();
    let out = other
        .kanban(&["gateway", "install", "--json"])
        .env("KANBAN_SYSTEMD_UNIT_DIR", s.units.path())
        .env("KANBAN_TEST_SYSTEMD", "absent")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(s.unit_files().len(), 2);

    let removed = s.ok("present", &["gateway", "uninstall"]);
    assert!(
        removed.starts_with(&format!("removed {name} (user unit)")),
        "{removed}"
    );
    assert_eq!(
        s.calls(),
        [
            format!("--user disable --now {name}"),
            "--user daemon-reload".to_owned()
        ]
    );
    assert!(!path.exists());
    let stderr = s.refused("present", &["gateway", "uninstall"]);
    assert!(stderr.contains("no unit is installed for this home"), "{stderr}");
}

#[test]
fn a_system_unit_runs_as_the_homes_owner_and_paths_are_quoted_for_systemd() {
    let s = Service::new();
    let (done, name) = s.installed("absent", &["--system"]);
    assert_eq!(done["systemctl"], false);
    assert!(s.calls().is_empty(), "no systemd: systemctl is not run");
    let text = std::fs::read_to_string(s.units.path().join(&name)).unwrap();
    insta::with_settings!({
        filters => vec![(r"(User|Group)=\d+", "$1=[id]")],
        prepend_module_to_snapshot => false,
    }, {
        insta::assert_snapshot!("gateway_unit_system", normalised(&text, &s.board.home()));
    });

    // A home whose path holds a space, a specifier, a variable and a quote is written so
    // that systemd reads the path back as it is.
    let odd = tempfile::tempdir().unwrap();
    let home = odd.path().join("my board %h $HOME \"q\"");
    let out = crate::common::bare()
        .arg("--home")
        .arg(&home)
        .args(["gateway", "install", "--json"])
        .env("KANBAN_SYSTEMD_UNIT_DIR", s.units.path())
        .env("KANBAN_TEST_SYSTEMD", "absent")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let done: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = std::fs::read_to_string(done["path"].as_str().unwrap()).unwrap();
    let quoted = home
        .display()
        .to_string()
        .replace('%', "%%")
        .replace('$', "$$")
        .replace('"', "\\\"");
    assert!(
        text.contains(&format!("\"--home\" \"{quoted}\" \"gateway\" \"run\"")),
        "{text}"
    );
}

#[test]
fn a_unit_file_we_did_not_write_is_kept_unless_forced() {
    let s = Service::new();
    let (_, name) = s.installed("absent", &[]);
    let path = s.units.path().join(&name);
    std::fs::write(&path, "[Service]\nExecStart=/bin/true\n").unwrap();
    let stderr = s.refused("absent", &["gateway", "install"]);
    assert!(
        stderr.contains("was not written by `kanban gateway install`") && stderr.contains("--force"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "[Service]\nExecStart=/bin/true\n"
    );
    let stderr = s.refused("absent", &["gateway", "uninstall"]);
    assert!(stderr.contains("refusing to replace it"), "{stderr}");
    assert!(path.exists());
    let text = s.ok("absent", &["gateway", "status"]);
    assert!(
        text.ends_with(&format!(
            "{} was not written by `kanban gateway install`\n",
            path.display()
        )),
        "{text}"
    );

    s.ok("absent", &["gateway", "install", "--force"]);
    assert!(std::fs::read_to_string(&path)
        .unwrap()
        .starts_with("# Written by `kanban gateway install`"));
}

#[test]
fn start_stop_restart_and_status_drive_systemctl_when_systemd_is_present() {
    let s = Service::new();
    let (_, user) = s.installed("present", &[]);
    s.calls();
    for (verb, done) in [
        ("start", "started"),
        ("restart", "restarted"),
        ("stop", "stopped"),
    ] {
        let out = s.ok("present", &["gateway", verb]);
        assert!(out.starts_with(&format!("{done} {user} (user unit)")), "{out}");
        assert_eq!(s.calls(), [format!("--user {verb} {user}")]);
    }
    let status: Value = serde_json::from_str(&s.ok("present", &["gateway", "status", "--json"])).unwrap();
    assert_eq!(
        (
            &status["state"],
            &status["service"]["active"],
            &status["service"]["enabled"]
        ),
        (
            &Value::from("stopped"),
            &Value::from("active"),
            &Value::from("enabled")
        ),
        "{status}"
    );
    assert_eq!(
        s.calls(),
        [
            format!("--user is-active {user}"),
            format!("--user is-enabled {user}")
        ]
    );
    let text = s.ok("present", &["gateway", "status"]);
    assert!(
        text.ends_with(&format!("service        {user} (user unit): active, enabled\n")),
        "{text}"
    );

    // A system unit is driven without --user.
    s.ok("present", &["gateway", "uninstall"]);
    let (_, system) = s.installed("present", &["--system"]);
    assert_eq!(system, user, "one name per home, whatever the scope");
    s.calls();
    s.ok("present", &["gateway", "restart"]);
    assert_eq!(s.calls(), [format!("restart {system}")]);

    // Without a unit, or without systemd, start and restart are refused and say what to do.
    s.ok("present", &["gateway", "uninstall"]);
    s.calls();
    let stderr = s.refused("present", &["gateway", "start"]);
    assert!(stderr.contains("`kanban gateway install`"), "{stderr}");
    s.installed("absent", &[]);
    for verb in ["start", "restart"] {
        let stderr = s.refused("absent", &["gateway", verb]);
        assert!(
            stderr.contains("no systemd on this machine: run `kanban gateway run`"),
            "{stderr}"
        );
    }
    // stop and status keep working from gateway.pid and gateway.json.
    let stderr = s.refused("absent", &["gateway", "stop"]);
    assert!(stderr.contains("no gateway is running"), "{stderr}");
    let text = s.ok("absent", &["gateway", "status"]);
    assert!(text.starts_with("state          stopped\n"), "{text}");
    assert!(
        text.ends_with("(user unit) (no systemd on this machine)\n"),
        "{text}"
    );
    assert!(s.calls().is_empty(), "no systemd: systemctl is never run");

    // The test switch takes only its two values.
    let stderr = s.refused("yes", &["gateway", "status"]);
    assert!(
        stderr.contains("KANBAN_TEST_SYSTEMD must be `present` or `absent`"),
        "{stderr}"
    );
}

/// A link planted where a careless installer would put its temporary file (beside the
/// unit, named after it) is neither followed nor left as the unit.
#[test]
fn install_follows_no_link_planted_beside_the_unit() {
    let s = Service::new();
    let (_, name) = s.installed("absent", &[]);
    s.ok("absent", &["gateway", "uninstall"]);
    let victim = s.bin.path().join("victim");
    std::fs::write(&victim, "not yours\n").unwrap();
    std::os::unix::fs::symlink(&victim, s.units.path().join(format!("{name}.tmp"))).unwrap();

    s.installed("absent", &[]);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "not yours\n");
    let unit = s.units.path().join(&name);
    let meta = std::fs::symlink_metadata(&unit).unwrap();
    assert!(
        meta.file_type().is_file(),
        "the unit is a regular file, not a link"
    );
    assert_eq!(meta.permissions().mode() & 0o777 & !0o022, 0o644);
    assert!(std::fs::read_to_string(&unit).unwrap().contains("[Service]"));
}
