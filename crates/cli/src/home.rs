//! The board's home: finding it, creating it (directory 0700, `config.yaml` 0600,
//! `kanban.db`) and opening its store.
//!
//! The database is opened before the config template is written, so a home whose
//! `kanban.db` is refused (not SQLite, another application's, newer) is left untouched.

use std::fs::{DirBuilder, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use board_sqlite::{Options, SqliteStore};

use crate::failure::Failure;

pub const DATABASE_FILE: &str = "kanban.db";
pub const CONFIG_FILE: &str = "config.yaml";

/// The SPEC 8 defaults, commented. Only the gateway reads it; the CLI only makes sure it exists.
const CONFIG_TEMPLATE: &str = r#"# kanban configuration. Every key is optional; the values below are the defaults.
# Keys follow the Hermes config so an existing Hermes user recognises them.

model:                          # the OpenAI-compatible endpoint
  provider: custom
  base_url: http://127.0.0.1:11434/v1
  default: llama3.1             # model name
  api_key_env: OPENAI_API_KEY   # or api_key: ...; or none for local servers

auxiliary:
  transient_retries: 2
  kanban_decomposer:            # each key overrides model.* for the decomposer
    model: ""
    base_url: ""
    timeout: 180
    max_tokens: 4000

kanban:
  dispatch_interval_seconds: 60
  max_spawn: 4
  auto_decompose: true
  auto_decompose_per_tick: 3
  auto_decompose_concurrency: 2
  auto_promote_children: true
  decompose_max_children: 16
  decompose_failure_limit: 3
  decompose_retry_base_seconds: 30
  default_assignee: default
  orchestrator_profile: default
  failure_limit: 2
  claim_ttl_seconds: 900
  sqlite_synchronous: full      # or normal

# Profiles are the kinds of worker the dispatcher can spawn. `default` always exists
# (without a command unless you give it one). For example:
#
# profiles:
#   default:
#     description: General-purpose worker
#     command: ["my-agent", "--task", "{task_id}"]
"#;

/// A home, resolved but not necessarily created yet.
#[derive(Debug)]
pub struct Home {
    pub dir: PathBuf,
}

/// What `init` found and made.
pub struct Prepared {
    pub store: SqliteStore,
    pub created_home: bool,
    pub created_config: bool,
}

impl Home {
    /// `--home`, else `$KANBAN_HOME`, else `~/.kanban`.
    pub fn resolve(flag: Option<PathBuf>) -> Result<Home, Failure> {
        let from_env = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let dir = match flag.or_else(|| from_env("KANBAN_HOME")) {
            Some(dir) => dir,
            None => match from_env("HOME") {
                Some(home) => home.join(".kanban"),
                None => {
                    return Err(Failure::Usage(
                        "no home: pass --home DIR or set KANBAN_HOME (HOME is not set)".to_owned(),
                    ))
                }
            },
        };
        Ok(Home { dir })
    }

    pub fn database(&self) -> PathBuf {
        self.dir.join(DATABASE_FILE)
    }

    pub fn config(&self) -> PathBuf {
        self.dir.join(CONFIG_FILE)
    }

    /// Creates what is missing (never overwriting a config) and opens the store.
    pub fn prepare(&self) -> Result<Prepared, Failure> {
        let created_home = ensure_dir(&self.dir)?;
        let store = SqliteStore::open(self.database(), &Options::default())?;
        let created_config = ensure_config(&self.config())?;
        Ok(Prepared {
            store,
            created_home,
            created_config,
        })
    }
}

fn io_failure(path: &Path, what: &str, e: std::io::Error) -> Failure {
    Failure::Refused(format!("{}: {what}: {e}", path.display()))
}

/// Returns whether the directory was created now.
fn ensure_dir(dir: &Path) -> Result<bool, Failure> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => return Ok(false),
        Ok(_) => {
            return Err(Failure::Refused(format!(
                "{}: the home is not a directory",
                dir.display()
            )))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_failure(dir, "cannot read the home", e)),
    }
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| io_failure(dir, "cannot create the home", e))?;
    Ok(true)
}

/// Writes the template unless a config exists; returns whether it wrote one.
fn ensure_config(path: &Path) -> Result<bool, Failure> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true).mode(0o600);
    let mut file = match options.open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
        Err(e) => return Err(io_failure(path, "cannot write the config template", e)),
    };
    file.write_all(CONFIG_TEMPLATE.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| io_failure(path, "cannot write the config template", e))?;
    Ok(true)
}
