//! The gateway as a systemd service (`kanban gateway install`, `uninstall`, `start`,
//! `stop`, `restart`, `status`): one unit per home, written where systemd looks for user
//! or system units, and driven through `systemctl`, run directly (never through a shell:
//! a home's path is untrusted text).

mod unit;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub use unit::{render, unit_name, UnitSpec};

/// Overrides the directory units are written to and looked for in (both scopes): for a
/// test, or a system whose units live elsewhere.
pub const UNIT_DIR_ENV: &str = "KANBAN_SYSTEMD_UNIT_DIR";

/// For tests only: `present` or `absent` overrides whether systemd runs this machine
/// (otherwise `/run/systemd/system` says, as `sd_booted` does). Any other value is an
/// error, so a stray setting is noticed rather than obeyed.
pub const TEST_SYSTEMD_ENV: &str = "KANBAN_TEST_SYSTEMD";

/// A user's own service manager, or the machine's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    User,
    System,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::System => "system",
        }
    }

    /// Where systemd reads this scope's administrator units.
    pub fn unit_dir(self) -> Result<PathBuf, ServiceError> {
        if let Some(dir) = std::env::var_os(UNIT_DIR_ENV).filter(|d| !d.is_empty()) {
            return Ok(PathBuf::from(dir));
        }
        match self {
            Scope::System => Ok(PathBuf::from("/etc/systemd/system")),
            Scope::User => {
                let absolute = |name: &str| {
                    std::env::var_os(name)
                        .map(PathBuf::from)
                        .filter(|p| p.is_absolute())
                };
                if let Some(config) = absolute("XDG_CONFIG_HOME") {
                    return Ok(config.join("systemd/user"));
                }
                absolute("HOME")
                    .map(|home| home.join(".config/systemd/user"))
                    .ok_or(ServiceError::NoUserDir)
            }
        }
    }

    /// `systemctl`'s arguments for this scope, then `args`.
    fn systemctl_args<'a>(self, args: &[&'a str]) -> Vec<&'a str> {
        let mut all = Vec::with_capacity(args.len() + 1);
        if self == Scope::User {
            all.push("--user");
        }
        all.extend_from_slice(args);
        all
    }
}

/// Why a service operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("{what} cannot go in a systemd unit: {why}")]
    Unrepresentable { what: String, why: String },
    #[error("no directory for user units: neither XDG_CONFIG_HOME nor HOME is an absolute path (set {UNIT_DIR_ENV})")]
    NoUserDir,
    #[error("{TEST_SYSTEMD_ENV} must be `present` or `absent` (it is for tests only), not {0:?}")]
    BadTestSwitch(String),
    #[error("{} was not written by `kanban gateway install`; refusing to replace it (--force replaces it)", path.display())]
    Foreign { path: PathBuf },
    #[error(
        "no unit is installed for this home ({name} is in neither the user nor the system unit directory)"
    )]
    NotInstalled { name: String },
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot run systemctl {args}: {source}")]
    Spawn { args: String, source: std::io::Error },
    #[error("systemctl {args} failed ({status})")]
    Systemctl {
        args: String,
        status: std::process::ExitStatus,
    },
}

/// Whether systemd manages this machine: `/run/systemd/system` exists (`sd_booted`),
/// unless [`TEST_SYSTEMD_ENV`] says otherwise.
pub fn systemd_present() -> Result<bool, ServiceError> {
    match std::env::var_os(TEST_SYSTEMD_ENV) {
        None => Ok(Path::new("/run/systemd/system").is_dir()),
        Some(v) if v == "present" => Ok(true),
        Some(v) if v == "absent" => Ok(false),
        Some(v) => Err(ServiceError::BadTestSwitch(v.to_string_lossy().into_owned())),
    }
}

/// A unit we wrote for a home.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Unit {
    pub name: String,
    pub scope: Scope,
    pub path: PathBuf,
}

impl Unit {
    /// Runs `systemctl [--user] VERB... NAME`, its output shown to the caller.
    pub fn systemctl(&self, verb: &[&str]) -> Result<(), ServiceError> {
        let mut args = verb.to_vec();
        args.push(&self.name);
        systemctl(self.scope, &args)
    }

    /// `systemctl [--user] QUERY NAME`'s one-word answer (`active`, `enabled`...), which
    /// it prints whatever its exit status.
    pub fn query(&self, query: &str) -> Result<String, ServiceError> {
        let args = self.scope.systemctl_args(&[query, &self.name]);
        let out = Command::new("systemctl")
            .args(&args)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .map_err(|source| ServiceError::Spawn {
                args: args.join(" "),
                source,
            })?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }
}

/// Runs `systemctl [--user] ARGS`; a non-zero exit is an error (systemctl has said why).
fn systemctl(scope: Scope, args: &[&str]) -> Result<(), ServiceError> {
    let args = scope.systemctl_args(args);
    let status = Command::new("systemctl")
        .args(&args)
        .stdin(Stdio::null())
        .status()
        .map_err(|source| ServiceError::Spawn {
            args: args.join(" "),
            source,
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(ServiceError::Systemctl {
            args: args.join(" "),
            status,
        })
    }
}

/// The unit we wrote for `home` (absolute), in `scope` or else in either (user first).
pub fn installed(home: &Path, scope: Option<Scope>) -> Result<Option<Unit>, ServiceError> {
    let name = unit_name(home);
    let scopes = match scope {
        Some(s) => vec![s],
        None => vec![Scope::User, Scope::System],
    };
    let scopes_len = scopes.len();
    for scope in scopes {
        let dir = match scope.unit_dir() {
            Ok(dir) => dir,
            // Looking everywhere, a scope without a directory holds no unit.
            Err(ServiceError::NoUserDir) if scopes_len > 1 => continue,
            Err(e) => return Err(e),
        };
        let path = dir.join(&name);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => {
                return Err(ServiceError::Io {
                    what: "cannot read",
                    path,
                    source,
                })
            }
        };
        // With UNIT_DIR_ENV both scopes share a directory: the file says which it is.
        match unit::written_scope(&text) {
            Some(written) if written == scope => return Ok(Some(Unit { name, scope, path })),
            Some(_) => continue,
            None => return Err(ServiceError::Foreign { path }),
        }
    }
    Ok(None)
}

/// What `install` did.
#[derive(Debug, serde::Serialize)]
pub struct Installed {
    #[serde(flatten)]
    pub unit: Unit,
    /// The file was written (false: it already held exactly this unit).
    pub written: bool,
    /// systemd was told (`daemon-reload`, `enable`).
    pub systemctl: bool,
}

/// Writes the unit for `home` (absolute) running `exe`, then, when systemd is present,
/// reloads systemd and enables the unit. A file at that path we did not write is
/// replaced only with `force`.
pub fn install(home: &Path, exe: &Path, scope: Scope, force: bool) -> Result<Installed, ServiceError> {
    let systemd = systemd_present()?;
    let owner = match scope {
        Scope::User => None,
        Scope::System => {
            let meta = std::fs::metadata(home).map_err(|source| ServiceError::Io {
                what: "cannot read the owner of",
                path: home.to_path_buf(),
                source,
            })?;
            Some((meta.uid(), meta.gid()))
        }
    };
    let text = render(&UnitSpec {
        scope,
        exe,
        home,
        owner,
    })?;
    let dir = scope.unit_dir()?;
    let name = unit_name(home);
    let path = dir.join(&name);
    let written = match std::fs::read_to_string(&path) {
        Ok(old) if old == text => false,
        Ok(old) if unit::written_scope(&old).is_none() && !force => {
            return Err(ServiceError::Foreign { path })
        }
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(source) => {
            return Err(ServiceError::Io {
                what: "cannot read",
                path,
                source,
            })
        }
    };
    if written {
        write_file(&dir, &path, &text)?;
    }
    if systemd {
        systemctl(scope, &["daemon-reload"])?;
        systemctl(scope, &["enable", &name])?;
    }
    Ok(Installed {
        unit: Unit { name, scope, path },
        written,
        systemctl: systemd,
    })
}

/// Writes `text` to `path` in `dir` whole, readable by all as unit files are, the way
/// the home writes its files: a new, uniquely named temp file (no link followed, nothing
/// planted opened) renamed over it.
fn write_file(dir: &Path, path: &Path, text: &str) -> Result<(), ServiceError> {
    let io = |what, path: &Path| {
        let path = path.to_path_buf();
        move |source| ServiceError::Io { what, path, source }
    };
    std::fs::create_dir_all(dir).map_err(io("cannot create", dir))?;
    board_home::safety::write_replacing(path, text.as_bytes(), 0o644).map_err(io("cannot write", path))
}

/// Stops, disables and removes the unit for `home` (in `scope`, else whichever is
/// installed). A unit file we did not write is removed only with `force`.
pub fn uninstall(home: &Path, scope: Option<Scope>, force: bool) -> Result<Unit, ServiceError> {
    let unit = match installed(home, scope) {
        Ok(Some(unit)) => unit,
        Ok(None) => {
            return Err(ServiceError::NotInstalled {
                name: unit_name(home),
            })
        }
        Err(ServiceError::Foreign { path }) if force => Unit {
            name: unit_name(home),
            scope: scope.unwrap_or(Scope::User),
            path,
        },
        Err(e) => return Err(e),
    };
    let systemd = systemd_present()?;
    if systemd {
        unit.systemctl(&["disable", "--now"])?;
    }
    std::fs::remove_file(&unit.path).map_err(|source| ServiceError::Io {
        what: "cannot remove",
        path: unit.path.clone(),
        source,
    })?;
    if systemd {
        systemctl(unit.scope, &["daemon-reload"])?;
    }
    Ok(unit)
}
