//! A home is trusted only when it is ours alone: a home, `config.yaml`, `logs/` or
//! `workspaces/` that another user owns or can write is refused with one line naming the
//! path and the fix, before any command of its config runs; and links planted in a home
//! (`gateway.tmp`, `gateway.pid`, a log, a workspace) are never followed, so the files
//! they point at stay byte-for-byte the same.

use crate::common;
use crate::gateway_board;

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Board;

const NOBODY: u32 = 65534;
const LIMIT: Duration = Duration::from_secs(60);

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A config whose only worker would leave `marker` behind if it ever ran.
fn marker_config(marker: &Path) -> String {
    format!(
        "kanban:\n  max_spawn: 2\nprofiles:\n  default:\n    command: [\"touch\", {:?}]\n",
        marker.display().to_string()
    )
}

/// Runs `kanban --home HOME ARGS` and checks it is refused with one line that names
/// `path` and says `fix`.
fn assert_refused(home: &Path, args: &[&str], path: &Path, fix: &str) {
    // Bounded: a `gateway run` that was not refused would otherwise run forever.
    let out = common::bare()
        .arg("--home")
        .arg(home)
        .args(args)
        .timeout(LIMIT)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?} was not refused: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    assert!(stderr.contains(fix), "{args:?}: {stderr}");
}

const VERBS: [&[&str]; 5] = [
    &["list"],
    &["dispatch"],
    &["gateway", "run"],
    &["config", "check"],
    &["create", "more work"],
];

#[test]
fn a_home_or_its_files_writable_by_others_are_refused() {
    let board = Board::init();
    let home = board.home();
    let marker = board.dir.path().join("ran");
    std::fs::write(home.join("config.yaml"), marker_config(&marker)).unwrap();
    board.create(&["work"]);
    let before = board.snapshot();

    chmod(&home, 0o777);
    for verb in VERBS {
        assert_refused(&home, verb, &home, &format!("chmod 700 {}", home.display()));
    }
    chmod(&home, 0o700);

    let config = home.join("config.yaml");
    chmod(&config, 0o666);
    assert_refused(
        &home,
        &["dispatch"],
        &config,
        &format!("chmod 600 {}", config.display()),
    );
    chmod(&config, 0o600);

    for dir in ["logs", "workspaces"] {
        let path = home.join(dir);
        std::fs::create_dir(&path).unwrap();
        chmod(&path, 0o770);
        assert_refused(&home, &["dispatch"], &path, "chmod 700");
        chmod(&path, 0o700);
    }

    assert!(!marker.exists(), "a refused home ran its worker");
    assert!(!home.join("gateway.lock").exists() && !home.join("gateway.pid").exists());
    assert_eq!(board.snapshot(), before);
    board.ok(&["list"]);
}

#[test]
fn a_linked_config_or_board_file_is_refused() {
    let board = Board::init();
    let home = board.home();
    let marker = board.dir.path().join("ran");
    for name in ["config.yaml", "kanban.db"] {
        let path = home.join(name);
        let elsewhere = board.dir.path().join(name);
        std::fs::rename(&path, &elsewhere).unwrap();
        if name == "config.yaml" {
            std::fs::write(&elsewhere, marker_config(&marker)).unwrap();
        }
        symlink(&elsewhere, &path).unwrap();
        assert_refused(&home, &["dispatch"], &path, "symbolic link");
        std::fs::remove_file(&path).unwrap();
        std::fs::rename(&elsewhere, &path).unwrap();
    }
    assert!(!marker.exists(), "a linked config ran its worker");
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// A home made by another user: as root (as CI runs), `nobody` creates it with
/// `setpriv`, config and all; otherwise `/`, which root owns.
fn foreign_home(dir: &Path, marker: &Path) -> (PathBuf, u32) {
    if euid() != 0 {
        return (PathBuf::from("/"), 0);
    }
    chmod(dir, 0o755);
    let shared = dir.join("shared");
    std::fs::create_dir(&shared).unwrap();
    chmod(&shared, 0o1777);
    let home = shared.join("home");
    let status = Command::new("setpriv")
        .args([
            "--reuid",
            &NOBODY.to_string(),
            "--regid",
            &NOBODY.to_string(),
            "--clear-groups",
        ])
        .args([
            "sh",
            "-c",
            "mkdir -m 755 \"$1\" && printf '%s' \"$2\" > \"$1/config.yaml\"",
        ])
        .arg("sh")
        .arg(&home)
        .arg(marker_config(marker))
        .status()
        .expect("setpriv (util-linux)");
    assert!(status.success(), "setpriv could not play the other user");
    (home, NOBODY)
}

#[test]
fn a_home_owned_by_another_user_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let (home, owner) = foreign_home(dir.path(), &marker);
    for verb in VERBS {
        assert_refused(&home, verb, &home, &format!("owned by uid {owner}"));
    }
    assert!(!marker.exists(), "the other user's worker ran");
    assert!(!home.join("kanban.db").exists(), "a board was made in their home");
}

/// A file of ours outside the home, which links in the home point at.
fn victim(dir: &Path) -> (PathBuf, Vec<u8>) {
    let path = dir.join("victim.txt");
    let bytes = b"precious, mode 0600\n".to_vec();
    std::fs::write(&path, &bytes).unwrap();
    chmod(&path, 0o600);
    (path, bytes)
}

#[test]
fn planted_log_and_workspace_links_are_refused_and_their_targets_unchanged() {
    let board = Board::init();
    let home = board.home();
    let (target, bytes) = victim(board.dir.path());
    let target_dir = board.dir.path().join("victim-dir");
    std::fs::create_dir(&target_dir).unwrap();
    let script = "echo worker-output; echo planted > here.txt";
    std::fs::write(
        home.join("config.yaml"),
        format!(
            "kanban:\n  max_spawn: 4\nprofiles:\n  default:\n    command: [\"sh\", \"-c\", {script:?}]\n"
        ),
    )
    .unwrap();
    let logged = board.create(&["log planted"]);
    let worked = board.create(&["workspace planted"]);
    for dir in ["logs", "workspaces"] {
        std::fs::create_dir(home.join(dir)).unwrap();
        chmod(&home.join(dir), 0o700);
    }
    symlink(&target, home.join("logs").join(format!("{logged}.log"))).unwrap();
    symlink(&target_dir, home.join("workspaces").join(&worked)).unwrap();

    let out = common::bare()
        .arg("--home")
        .arg(&home)
        .arg("dispatch")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);

    assert_eq!(
        std::fs::read(&target).unwrap(),
        bytes,
        "the log's target was written"
    );
    assert_eq!(std::fs::read_dir(&target_dir).unwrap().count(), 0, "{stderr}");
    for id in [&logged, &worked] {
        let runs = board.json(&["runs", id]);
        let error = runs[0]["error"].as_str().unwrap_or_default().to_owned();
        assert!(error.contains("symbolic link"), "{id}: {runs}");
    }
}

#[test]
fn planted_gateway_tmp_and_pid_links_are_not_followed() {
    let mut board = gateway_board::GatewayBoard::new(gateway_board::Setup::default());
    let home = board.path();
    let (target, bytes) = victim(board.dir.path());
    for name in ["gateway.tmp", "gateway.pid"] {
        symlink(&target, home.join(name)).unwrap();
    }

    board.start_gateway();
    board.prove_ticks(1);

    assert_eq!(
        std::fs::read(&target).unwrap(),
        bytes,
        "a link's target was written"
    );
    let pid = std::fs::symlink_metadata(home.join("gateway.pid")).unwrap();
    assert!(pid.is_file(), "gateway.pid is still a link");
    let status = std::fs::read_to_string(home.join("gateway.json")).unwrap();
    assert!(status.contains("\"pid\""), "{status}");
    assert!(
        std::fs::symlink_metadata(home.join("gateway.tmp"))
            .unwrap()
            .file_type()
            .is_symlink(),
        "gateway.tmp is left alone"
    );

    // A planted lock is refused outright: opening it would follow the link.
    board.kill_gateway();
    std::fs::remove_file(home.join("gateway.lock")).unwrap();
    symlink(&target, home.join("gateway.lock")).unwrap();
    let log = board.dir.path().join("refused.stderr");
    let mut gateway = board
        .command(&["gateway", "run"])
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = gateway.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > LIMIT {
            let _ = gateway.kill();
            panic!("a gateway on a linked lock file was not refused");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(1));
    assert!(std::fs::read_to_string(&log).unwrap().contains("symbolic link"));
    assert_eq!(std::fs::read(&target).unwrap(), bytes);
}
