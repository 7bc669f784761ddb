//! A resolved home and what is done with it: its paths, creating it, loading its config
//! after checking it is ours alone, opening its store with the configured settings, and
//! writing the config template `kanban init` leaves.
//!
//! A home is absolute from the moment it is resolved: workers run in their own
//! directories and are handed `KANBAN_HOME`, so a relative one would name another place.

use std::ffi::OsString;
use std::fs::DirBuilder;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use board_core::{Store, TaskId};
use board_postgres::PgStore;
use board_sqlite::{Options, SqliteStore};

use crate::boards::BoardSlug;
use crate::config::{Config, ConfigError, Loaded};
use crate::safety::{check_board_dir, check_home, UnsafeHome};
use crate::{
    CONFIG_FILE, DATABASE_FILE, LOCK_FILE, LOGS_DIR, PID_FILE, SERVE_TOKEN_FILE, STATUS_FILE, WAITERS_DIR,
    WAKE_SOCKET, WORKSPACES_DIR,
};

/// The variable that names the home when `--home` does not.
pub const HOME_VARIABLE: &str = "KANBAN_HOME";

/// What a worker is told in its environment, beside the home: the board file (on
/// SQLite), its task and run, the run's claim lock, its profile, its workspace, the
/// card's title, and the task's tenant and skills when it has them.
pub mod worker_variables {
    pub const DATABASE: &str = "KANBAN_DB";
    pub const TASK: &str = "KANBAN_TASK";
    pub const RUN: &str = "KANBAN_RUN_ID";
    pub const CLAIM_LOCK: &str = "KANBAN_CLAIM_LOCK";
    pub const PROFILE: &str = "KANBAN_PROFILE";
    pub const WORKSPACE: &str = "KANBAN_WORKSPACE";
    pub const TITLE: &str = "KANBAN_TITLE";
    pub const TENANT: &str = "KANBAN_TENANT";
    /// Hermes' name for the tenant, which a Hermes worker reads.
    pub const HERMES_TENANT: &str = "HERMES_TENANT";
    /// The skills, comma-joined (a skill name never holds a comma).
    pub const SKILLS: &str = "KANBAN_SKILLS";
}

/// Why a home could not be found or used. Each is one line.
#[derive(Debug, thiserror::Error)]
pub enum HomeError {
    /// Neither `--home`, `$KANBAN_HOME` nor `$HOME` says where the home is.
    #[error("no home: pass --home DIR or set KANBAN_HOME (HOME is not set)")]
    NoHome,
    /// `--home` is given but empty.
    #[error("--home is empty: name the board's home directory")]
    EmptyFlag,
    /// `$KANBAN_HOME` is set but empty; falling back to `~/.kanban` would silently
    /// pick another board.
    #[error("KANBAN_HOME is set but empty: name the board's home directory or unset it")]
    EmptyVariable,
    /// A leading `~` with no `$HOME` to expand it to.
    #[error("cannot expand ~ in {0}: HOME is not set")]
    NoTilde(String),
    /// The current directory, which a relative home is taken against, is unusable.
    #[error("{}: cannot make the home's path absolute: {source}", path.display())]
    Absolute { path: PathBuf, source: std::io::Error },
    /// A board that cannot be found or used, in one line.
    #[error("{0}")]
    Board(String),
    /// A board named against the slug rule, in one line.
    #[error("{0}")]
    BadBoard(String),
    /// The home or a file in it is not ours alone.
    #[error("{0}")]
    Unsafe(#[from] UnsafeHome),
    /// The config cannot be used.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// The board file cannot be opened.
    #[error("{0}")]
    Store(#[from] board_sqlite::OpenError),
    /// The PostgreSQL board cannot be opened (its password never in the message).
    #[error("{0}")]
    Postgres(#[from] board_postgres::OpenError),
    /// Creating the home or writing its template failed.
    #[error("{}: {what}: {source}", path.display())]
    Io {
        path: PathBuf,
        what: &'static str,
        source: std::io::Error,
    },
}

impl HomeError {
    /// Whether the command line or environment is at fault rather than the home itself.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            HomeError::NoHome
                | HomeError::EmptyFlag
                | HomeError::EmptyVariable
                | HomeError::NoTilde(_)
                | HomeError::BadBoard(_)
        )
    }
}

/// A home made ready to use: created if it was missing, checked, its config loaded and
/// its store open.
pub struct Opened {
    pub store: Arc<dyn Store>,
    pub loaded: Loaded,
    /// Whether the home directory was created now.
    pub created_home: bool,
}

/// A board's home directory, always an absolute path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Home {
    dir: PathBuf,
    /// The board of the home its verbs act on (docs/boards.md).
    board: BoardSlug,
}

impl Home {
    /// `--home`, else `$KANBAN_HOME`, else `~/.kanban`, from the process's environment.
    pub fn resolve(flag: Option<PathBuf>) -> Result<Home, HomeError> {
        Home::resolve_with(flag, &|name| std::env::var_os(name))
    }

    /// [`Home::resolve`] with the environment given.
    pub fn resolve_with(
        flag: Option<PathBuf>,
        env: &dyn Fn(&str) -> Option<OsString>,
    ) -> Result<Home, HomeError> {
        let given = match (flag, env(HOME_VARIABLE)) {
            (Some(dir), _) if dir.as_os_str().is_empty() => return Err(HomeError::EmptyFlag),
            (Some(dir), _) => dir,
            (None, Some(dir)) if dir.is_empty() => return Err(HomeError::EmptyVariable),
            (None, Some(dir)) => PathBuf::from(dir),
            (None, None) => PathBuf::from("~/.kanban"),
        };
        let user_home = env("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
        let expanded = match given.strip_prefix("~") {
            Ok(rest) => match user_home {
                Some(user_home) if rest.as_os_str().is_empty() => user_home,
                Some(user_home) => user_home.join(rest),
                None if given == Path::new("~/.kanban") => return Err(HomeError::NoHome),
                None => return Err(HomeError::NoTilde(given.display().to_string())),
            },
            Err(_) => given,
        };
        Home::at(&expanded)
    }

    /// The home at `dir`, relative paths taken against the current directory.
    pub fn at(dir: &Path) -> Result<Home, HomeError> {
        let dir = std::path::absolute(dir).map_err(|source| HomeError::Absolute {
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(Home {
            dir,
            board: BoardSlug::default_board(),
        })
    }

    /// The same home, acting on `board`.
    pub fn on_board(&self, board: BoardSlug) -> Home {
        Home {
            dir: self.dir.clone(),
            board,
        }
    }

    /// The board this home's verbs act on.
    pub fn board(&self) -> &BoardSlug {
        &self.board
    }

    /// The home directory itself.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The board's SQLite file: `kanban.db` in the board's directory.
    pub fn database(&self) -> PathBuf {
        self.board_dir().join(DATABASE_FILE)
    }

    pub fn config(&self) -> PathBuf {
        self.dir.join(CONFIG_FILE)
    }

    pub fn lock_file(&self) -> PathBuf {
        self.dir.join(LOCK_FILE)
    }

    pub fn pid_file(&self) -> PathBuf {
        self.dir.join(PID_FILE)
    }

    pub fn status_file(&self) -> PathBuf {
        self.board_dir().join(STATUS_FILE)
    }

    /// The socket a running gateway on a SQLite board hears wake-ups on.
    pub fn wake_socket(&self) -> PathBuf {
        self.board_dir().join(WAKE_SOCKET)
    }

    /// Where processes that wait for work (lanes' claims) bind their wake-up sockets.
    pub fn waiters(&self) -> PathBuf {
        self.board_dir().join(WAITERS_DIR)
    }

    pub fn logs(&self) -> PathBuf {
        self.board_dir().join(LOGS_DIR)
    }

    pub fn workspaces(&self) -> PathBuf {
        self.board_dir().join(WORKSPACES_DIR)
    }

    /// The working directory of `task`'s workers.
    pub fn workspace(&self, task: &TaskId) -> PathBuf {
        self.workspaces().join(task.as_str())
    }

    /// The log of `task`'s workers, every attempt appended.
    pub fn log(&self, task: &TaskId) -> PathBuf {
        self.logs().join(format!("{task}.log"))
    }

    /// Where the token `kanban serve` requires by default is kept.
    pub fn serve_token_file(&self) -> PathBuf {
        self.dir.join(SERVE_TOKEN_FILE)
    }

    /// The home's serve token: read from [`Home::serve_token_file`], which is made the
    /// first time (32 random hex digits, owner-only, never replaced, so a signed-in
    /// browser stays signed in). The file must be ours, a regular file (no link
    /// followed), and readable by nobody else.
    pub fn serve_token(&self) -> Result<String, HomeError> {
        use std::io::Read;
        use std::os::unix::fs::PermissionsExt;
        let path = self.serve_token_file();
        let io = |what| {
            let path = path.clone();
            move |source| HomeError::Io { path, what, source }
        };
        let mut random = [0u8; 16];
        getrandom::fill(&mut random)
            .map_err(|e| io("cannot make a token")(std::io::Error::other(e.to_string())))?;
        let fresh: String = random.iter().map(|b| format!("{b:02x}")).collect();
        crate::safety::create_private(&path, format!("{fresh}\n").as_bytes())
            .map_err(io("cannot write the token"))?;
        let file = crate::safety::open_read(&path).map_err(io("cannot read the token"))?;
        let mode = file
            .metadata()
            .map_err(io("cannot read the token"))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Err(UnsafeHome::Readable { path }.into());
        }
        let mut text = String::new();
        file.take(4096)
            .read_to_string(&mut text)
            .map_err(io("cannot read the token"))?;
        Ok(text.trim().to_owned())
    }

    /// Creates the home (and its parents) owner-only unless it exists; returns whether
    /// it was created now.
    pub fn create(&self) -> Result<bool, HomeError> {
        let io = |what| {
            let path = self.dir.clone();
            move |source| HomeError::Io { path, what, source }
        };
        match std::fs::metadata(&self.dir) {
            Ok(meta) if meta.is_dir() => return Ok(false),
            Ok(_) => {
                return Err(UnsafeHome::NotKind {
                    path: self.dir.clone(),
                    what: "the home is not a directory",
                }
                .into())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("cannot read the home")(e)),
        }
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(io("cannot create the home"))?;
        Ok(true)
    }

    /// The home's config (every default when it has none) as this home's board runs
    /// under it ([`Config::for_board`]). A home that exists must be ours alone first:
    /// whoever else can write to it chooses the commands we run.
    pub fn load_config(&self) -> Result<Loaded, HomeError> {
        if self.dir.exists() {
            check_home(&self.dir)?;
            if !self.board.is_default() && self.board_exists() {
                check_board_dir(&self.board_dir())?;
            }
        }
        let mut loaded = Config::load(&self.dir)?;
        loaded.config = loaded.config.for_board(&self.board);
        Ok(loaded)
    }

    /// `kanban config set`: one key of the config ([`crate::config::set_key`]), in a home
    /// created when missing and checked as any home is before its config is read.
    pub fn set_config(&self, key: &str, value: &str) -> Result<serde_json::Value, HomeError> {
        self.create()?;
        check_home(&self.dir)?;
        Ok(crate::config::set_key(&self.dir, key, value, &|name| {
            std::env::var(name).ok()
        })?)
    }

    /// Creates what is missing but the config, loads the config (read only) and opens
    /// the store, whose settings come from it; a broken config stops here.
    pub fn open(&self) -> Result<Opened, HomeError> {
        let created_home = self.create()?;
        let loaded = self.load_config()?;
        let store = self.open_store(&loaded.config)?;
        Ok(Opened {
            store,
            loaded,
            created_home,
        })
    }

    /// Opens the board to read it: as [`Home::open_store`] opens it when that can, else
    /// (a board file or directory this process cannot write) the SQLite board read only,
    /// else as a snapshot without locks (then `true`, [`SqliteStore::open_snapshot`]).
    /// Creates no home.
    pub fn open_for_reading(&self) -> Result<(Opened, bool), HomeError> {
        let loaded = self.load_config()?;
        let (store, snapshot) = match self.open_store(&loaded.config) {
            Ok(store) => (store, false),
            Err(first) if loaded.config.database_url.is_none() && self.database().exists() => {
                let (store, snapshot) = self.read_only_board().map_err(|_| first)?;
                (Arc::new(store) as Arc<dyn Store>, snapshot)
            }
            Err(e) => return Err(e),
        };
        let opened = Opened {
            store,
            loaded,
            created_home: false,
        };
        Ok((opened, snapshot))
    }

    /// The home's SQLite board opened without writing anything, not even a migration: read
    /// only, else as a snapshot without locks (then `true`).
    pub fn read_only_board(&self) -> Result<(SqliteStore, bool), HomeError> {
        match SqliteStore::open_read_only(self.database()).and_then(SqliteStore::ensure_readable) {
            Ok(store) => Ok((store, false)),
            Err(_) => Ok((SqliteStore::open_snapshot(self.database())?, true)),
        }
    }

    /// Opens (creating when new) the board with the configured settings; the one way
    /// every verb, the gateway and the web board open it: the PostgreSQL board of
    /// `database_url` when there is one, else the home's `kanban.db`.
    pub fn open_store(&self, config: &Config) -> Result<Arc<dyn Store>, HomeError> {
        if !self.board_exists() {
            return Err(HomeError::Board(format!(
                "no board {} (`kanban boards list` shows the boards)",
                self.board
            )));
        }
        if let Some(url) = &config.database_url {
            // Each process's sessions are told apart in `pg_stat_activity`.
            let options = self.postgres_options(format!("kanban pid {}", std::process::id()));
            return Ok(Arc::new(PgStore::open(url.expose(), &options)?));
        }
        let options = Options {
            synchronous: config.kanban.sqlite_synchronous,
            ..Options::default()
        };
        let store = SqliteStore::open(self.database(), &options)?;
        Ok(Arc::new(store.on_wake(crate::wake::nudger(self))))
    }

    /// How this home's board is opened on PostgreSQL: in the URL's schema for the default
    /// board, in its own schema ([`BoardSlug::schema`]) for another.
    pub fn postgres_options(&self, application_name: String) -> board_postgres::Options {
        board_postgres::Options {
            application_name,
            schema: self.board.schema(),
            ..board_postgres::Options::default()
        }
    }

    /// The board `open_store` opens, as it may be shown: the URL with its password
    /// redacted, or the path of `kanban.db`.
    pub fn board_name(&self, config: &Config) -> String {
        match &config.database_url {
            Some(url) => match self.board.schema() {
                Some(schema) => format!("{url} (schema {schema})"),
                None => url.to_string(),
            },
            None => self.database().display().to_string(),
        }
    }

    /// Writes the config template, whole, unless a config exists (never overwriting one);
    /// returns whether it wrote one.
    pub fn write_template(&self) -> Result<bool, HomeError> {
        let path = self.config();
        crate::safety::create_private(&path, Config::template().as_bytes()).map_err(|source| HomeError::Io {
            path: path.clone(),
            what: "cannot write the config template",
            source,
        })
    }
}
