//! The board's home: finding it, creating it (directory 0700, `config.yaml` 0600,
//! `kanban.db`), refusing one that is not ours alone, loading its config and opening
//! its store.
//!
//! The config is loaded (read only) before the database is opened, since the store's
//! `PRAGMA synchronous` comes from it; a broken config stops every verb that opens the
//! board. The database is opened before the config template is written, so a home whose
//! `kanban.db` is refused (not SQLite, another application's, newer) is left untouched.

use std::fs::{DirBuilder, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use board_sqlite::{Options, SqliteStore};
use gateway::config::{Config, Loaded, CONFIG_FILE, TEMPLATE};
use gateway::home::check_home;

use crate::failure::{one_line, Failure};

pub const DATABASE_FILE: &str = "kanban.db";

/// A home, resolved but not necessarily created yet.
#[derive(Debug)]
pub struct Home {
    pub dir: PathBuf,
}

/// What `init` found and made.
pub struct Prepared {
    pub store: SqliteStore,
    pub config: Config,
    pub created_home: bool,
    pub created_config: bool,
}

impl Home {
    /// `--home`, else `$KANBAN_HOME`, else `~/.kanban`.
    pub fn resolve(flag: Option<PathBuf>) -> Result<Home, Failure> {
        let dir = gateway::daemon::resolve_home(flag).ok_or_else(|| {
            Failure::Usage("no home: pass --home DIR or set KANBAN_HOME (HOME is not set)".to_owned())
        })?;
        Ok(Home { dir })
    }

    pub fn database(&self) -> PathBuf {
        self.dir.join(DATABASE_FILE)
    }

    pub fn config(&self) -> PathBuf {
        self.dir.join(CONFIG_FILE)
    }

    /// The home's config (every default when it has none), or its one-line error. A
    /// home that exists must be ours alone (see `gateway::home`): whoever else can
    /// write to it chooses the commands we run.
    pub fn load_config(&self) -> Result<Loaded, Failure> {
        if self.dir.exists() {
            check_home(&self.dir).map_err(|e| Failure::Refused(one_line(&e.to_string())))?;
        }
        Config::load(&self.dir).map_err(|e| Failure::Refused(one_line(&e.to_string())))
    }

    /// Creates what is missing (never overwriting a config), loads the config and opens
    /// the store. Config warnings are left to `config check` and the gateway, so that a
    /// worker's every `kanban` call does not repeat them.
    pub fn prepare(&self) -> Result<Prepared, Failure> {
        let created_home = ensure_dir(&self.dir)?;
        let config = self.load_config()?.config;
        let options = Options {
            synchronous: config.kanban.sqlite_synchronous,
            ..Options::default()
        };
        let store = SqliteStore::open(self.database(), &options)?;
        let created_config = ensure_config(&self.config())?;
        Ok(Prepared {
            store,
            config,
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
    file.write_all(TEMPLATE.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| io_failure(path, "cannot write the config template", e))?;
    Ok(true)
}
