//! What the CLI tests share: a board in its own temporary home, the `kanban` binary run
//! against it, and a read-only dump of the database to prove a refusal changed nothing.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use board_core::{BoardReads, BoardSnapshot, BoardStats, TaskId};
use board_sqlite::SqliteStore;
use serde_json::Value;

pub struct Board {
    pub dir: tempfile::TempDir,
}

impl Board {
    /// A board whose home does not exist yet (the first command creates it).
    pub fn new() -> Board {
        Board {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// A board already initialised.
    pub fn init() -> Board {
        let board = Board::new();
        board.kanban(&["init"]).assert().success();
        board
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub fn db(&self) -> PathBuf {
        self.home().join("kanban.db")
    }

    /// `kanban --home <home> ARGS...`, isolated from the caller's environment.
    pub fn kanban(&self, args: &[&str]) -> Command {
        let mut cmd = bare();
        cmd.arg("--home").arg(self.home()).args(args);
        cmd
    }

    /// `kanban serve` on a free loopback port with `args` added, its token
    /// [`SERVE_TOKEN`] (unless `args` give one): the child and its `host:port`.
    pub fn serve(&self, args: &[&str]) -> (std::process::Child, String) {
        let mut cmd = kanban_command();
        cmd.arg("--home")
            .arg(self.home())
            .args(["serve", "--bind", "127.0.0.1:0"])
            .args(args)
            .env("KANBAN_SERVE_TOKEN", SERVE_TOKEN);
        serving(cmd)
    }

    /// Runs a command that must succeed and returns its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.kanban(args).output().expect("run kanban");
        assert!(
            out.status.success(),
            "kanban {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.stderr.is_empty(),
            "stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 stdout")
    }

    /// Runs a `--json` command that must succeed and parses its stdout.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        let out = self.ok(&all);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
    }

    /// Creates a task and returns its id.
    pub fn create(&self, args: &[&str]) -> String {
        let mut all = vec!["create"];
        all.extend_from_slice(args);
        let task = self.json(&all);
        task["id"].as_str().expect("id").to_owned()
    }

    /// Runs `kanban ARGS` with `env` added, whatever its exit: the code, stdout and stderr.
    pub fn outcome(&self, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
        let out = self
            .kanban(args)
            .envs(env.iter().copied())
            .output()
            .expect("run kanban");
        let text = |b: Vec<u8>| String::from_utf8(b).expect("utf-8");
        (out.status.code(), text(out.stdout), text(out.stderr))
    }

    pub fn snapshot(&self) -> BoardSnapshot {
        snapshot_of(&self.db())
    }
}

pub fn snapshot_of(db: &Path) -> BoardSnapshot {
    SqliteStore::open_read_only(db)
        .expect("open read-only")
        .snapshot()
        .expect("snapshot")
}

pub const KANBAN: &str = env!("CARGO_BIN_EXE_kanban");

/// The token `Board::serve` gives `kanban serve`.
pub const SERVE_TOKEN: &str = "serve-token-5b1e0c9d7a3f42e8";

/// The login name every test command runs as: the default author and creator.
pub const USER: &str = "tester";

/// The binary as a std `Command`, with none of the caller's board variables.
pub fn kanban_command() -> std::process::Command {
    isolated(std::process::Command::new(KANBAN))
}

/// The binary with none of the caller's board variables.
pub fn bare() -> Command {
    Command::from_std(isolated(std::process::Command::new(KANBAN)))
}

fn isolated(mut cmd: std::process::Command) -> std::process::Command {
    cmd.env_remove("KANBAN_HOME")
        .env_remove("KANBAN_BOARD")
        .env_remove("KANBAN_TASK")
        .env_remove("KANBAN_RUN_ID")
        .env_remove("KANBAN_PROFILE")
        .env_remove("HERMES_PROFILE")
        .env_remove("RUST_LOG")
        .env_remove("LOGNAME")
        .env("USER", USER)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "100");
    cmd
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

/// Whether the test may run the part of its case that only root can (another user's
/// worker, a user switch): true as root. Otherwise, with `CI` set (CI runs the suites as
/// root) the test fails, saying so, rather than pass without its real case; without
/// `CI` it says on stderr what it left out.
pub fn root_for(what: &str) -> bool {
    if is_root() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "this test needs root to {what}, and CI is set (CI runs the suites as root): run it as root"
    );
    eprintln!("skipped, not being root: {what}");
    false
}

/// The user the binary runs as when the tests run as root (CI does): nobody.
const NOBODY: u32 = 65534;

/// The binary run as a user that permission bits bind: the caller, or, for root (whom
/// no mode stops), nobody through `setpriv` (util-linux), with everything under `dir`
/// handed to nobody first (ownership only: modes are the test's to set).
pub fn unprivileged(dir: &Path) -> std::process::Command {
    if !is_root() {
        return isolated(std::process::Command::new(KANBAN));
    }
    for path in std::iter::once(dir.to_path_buf()).chain(tree(dir)) {
        std::os::unix::fs::lchown(&path, Some(NOBODY), Some(NOBODY)).expect("chown to nobody");
    }
    let mut cmd = std::process::Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
    cmd.arg(binary_for_nobody(dir));
    isolated(cmd)
}

/// Everything under `dir`, depth first.
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(tree(&path));
        }
        out.push(path);
    }
    out
}

/// This build's binary, or a copy of it in `dir` when nobody cannot reach it (a
/// checkout under a private home directory).
fn binary_for_nobody(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let binary = Path::new(KANBAN);
    let others_may =
        |path: &Path, bits: u32| std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & bits == bits);
    let reachable = binary.ancestors().skip(1).all(|d| others_may(d, 0o001)) && others_may(binary, 0o005);
    if reachable {
        return binary.to_path_buf();
    }
    let copy = dir.join("kanban");
    std::fs::copy(binary, &copy).expect("copy the binary");
    std::os::unix::fs::lchown(&copy, Some(NOBODY), Some(NOBODY)).expect("chown the copy");
    copy
}

pub fn task_id(id: &str) -> TaskId {
    id.parse().expect("task id")
}

/// Opens the board for writes the CLI cannot make (recording a worker pid).
pub fn store(board: &Board) -> SqliteStore {
    SqliteStore::open(board.db(), &board_sqlite::Options::default()).expect("open store")
}

pub fn get(board: &Board, id: &str) -> board_core::Task {
    store(board).get(&task_id(id)).expect("task")
}

/// Starts `kanban serve` as `cmd` says (with `--bind 127.0.0.1:0` among its arguments)
/// and waits for the line that names its port: the child and its `host:port`.
pub fn serving(mut cmd: std::process::Command) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn kanban serve");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the serving line");
    let addr = line
        .trim()
        .strip_prefix("serving the board at http://")
        .and_then(|a| a.strip_suffix('/'))
        .unwrap_or_else(|| panic!("kanban serve printed {line:?}"))
        .to_owned();
    (child, addr)
}

/// The test virtualenv's interpreter (`cargo xtask venv` makes it, with the pinned
/// hermes-agent and the MCP SDK): a suite that needs it fails, never skips, without it.
pub fn venv_python() -> PathBuf {
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run `cargo xtask venv` to make the test virtualenv",
        python.display()
    );
    python
}
