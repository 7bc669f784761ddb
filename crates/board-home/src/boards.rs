//! The boards of a home (docs/boards.md): each a slug, Hermes' layout on disk. The
//! `default` board is the home's own `kanban.db`, `logs/` and `workspaces/` (a home made
//! before boards existed is its default board, unchanged); every other board is
//! `boards/SLUG/` with its own `kanban.db` (on PostgreSQL, its own schema), `logs/`,
//! `workspaces/`, wake-up socket and `board.json` (its display name and description).
//! `current_board` holds the board `boards switch` chose. A removed board's directory is
//! kept under `boards/_archived/` (a slug never starts with `_`, so no board is named so).

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::home::{Home, HomeError};
use crate::safety;

/// The directory of every board but the default.
pub const BOARDS_DIR: &str = "boards";
/// Where removed boards are kept, under [`BOARDS_DIR`].
pub const ARCHIVED_DIR: &str = "_archived";
/// The board `boards switch` chose, one slug.
pub const CURRENT_BOARD_FILE: &str = "current_board";
/// A board's display name and description, in its directory.
pub const BOARD_FILE: &str = "board.json";
/// The variable that names the board when `--board` does not.
pub const BOARD_VARIABLE: &str = "KANBAN_BOARD";
/// The most bytes of `board.json` or `current_board` read: both are a line or two.
const MAX_META_BYTES: u64 = 64 * 1024;

/// A board's name in paths, flags and URLs: Hermes' rule, 1-64 of lowercase letters,
/// digits, `-` and `_`, not starting with `-` or `_` (so never `..`, a separator or a
/// hidden name). Written in any case; kept lowercase.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct BoardSlug(String);

/// A board name that breaks the rule, in one line.
#[derive(Debug, thiserror::Error)]
#[error("invalid board {given:?}: 1-64 lowercase letters, digits, '-' or '_', not starting with '-' or '_'")]
pub struct BadSlug {
    pub given: String,
}

impl BoardSlug {
    /// The board every home has.
    pub const DEFAULT: &'static str = "default";

    pub fn default_board() -> BoardSlug {
        BoardSlug(BoardSlug::DEFAULT.to_owned())
    }

    pub fn parse(given: &str) -> Result<BoardSlug, BadSlug> {
        let slug = given.trim().to_ascii_lowercase();
        let bytes = slug.as_bytes();
        let fits = (1..=64).contains(&bytes.len())
            && bytes[0].is_ascii_alphanumeric()
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-' || *b == b'_');
        if !fits {
            return Err(BadSlug {
                given: given.chars().take(80).collect(),
            });
        }
        Ok(BoardSlug(slug))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_default(&self) -> bool {
        self.0 == BoardSlug::DEFAULT
    }

    /// The PostgreSQL schema of a board other than the default (which is the URL's own
    /// schema): `kanban_` and the slug.
    pub fn schema(&self) -> Option<String> {
        (!self.is_default()).then(|| self.identifier("kanban_"))
    }

    /// The name a removed board's schema is kept under.
    pub fn archived_schema(&self, now: i64) -> String {
        self.identifier(&format!("kanban_rm{now}_"))
    }

    /// `prefix` and the slug as a PostgreSQL identifier, which holds 63 bytes (a longer
    /// one is cut by the server, so two long slugs could meet): past that, the slug's
    /// head and a hash of the whole.
    fn identifier(&self, prefix: &str) -> String {
        const MAX: usize = 63;
        let whole = format!("{prefix}{}", self.0);
        if whole.len() <= MAX {
            return whole;
        }
        let hash = self.0.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        let head = MAX - prefix.len() - 17;
        format!("{prefix}{}_{hash:016x}", &self.0[..head])
    }

    /// A display name made from the slug, as Hermes makes it: `atm10-server` is
    /// `Atm10 Server`.
    pub fn title(&self) -> String {
        self.0
            .split(['-', '_'])
            .filter(|part| !part.is_empty())
            .map(|part| {
                let mut chars = part.chars();
                chars
                    .next()
                    .map(|first| first.to_uppercase().chain(chars).collect::<String>())
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl std::fmt::Display for BoardSlug {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for BoardSlug {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        BoardSlug::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// What `board.json` says of a board, beside its slug.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BoardMeta {
    pub name: String,
    pub description: String,
    pub created_at: Option<i64>,
}

impl Home {
    /// The directory of every board but the default.
    pub fn boards_dir(&self) -> PathBuf {
        self.dir().join(BOARDS_DIR)
    }

    /// The directory of this home's board: the home itself for the default board.
    pub fn board_dir(&self) -> PathBuf {
        match self.board().is_default() {
            true => self.dir().to_path_buf(),
            false => self.boards_dir().join(self.board().as_str()),
        }
    }

    fn current_board_file(&self) -> PathBuf {
        self.dir().join(CURRENT_BOARD_FILE)
    }

    /// Whether this home's board exists: the default always does; another has its
    /// directory under `boards/`.
    pub fn board_exists(&self) -> bool {
        self.board().is_default()
            || std::fs::symlink_metadata(self.board_dir()).is_ok_and(|meta| meta.is_dir())
    }

    /// The board of `--board`, else `$KANBAN_BOARD`, else the one `boards switch` chose,
    /// else the default; one that does not exist is an error that says how to make it.
    pub fn choose_board(self, flag: Option<&str>) -> Result<Home, HomeError> {
        let from_env = std::env::var(BOARD_VARIABLE)
            .ok()
            .filter(|v| !v.trim().is_empty());
        let (given, source) = match (flag, from_env) {
            (Some(flag), _) => (flag.to_owned(), "--board"),
            (None, Some(env)) => (env, BOARD_VARIABLE),
            (None, None) => match self.current_board()? {
                Some(slug) => (slug.0, CURRENT_BOARD_FILE),
                None => return Ok(self),
            },
        };
        let slug = BoardSlug::parse(&given).map_err(|e| HomeError::BadBoard(format!("{source}: {e}")))?;
        self.on_existing_board(slug, Some(source))
    }

    /// The same home on `slug`, which must exist; the refusal names where the name came
    /// from and how to make the board.
    pub fn on_existing_board(&self, slug: BoardSlug, source: Option<&str>) -> Result<Home, HomeError> {
        let home = self.on_board(slug);
        if !home.board_exists() {
            let from = source.map(|s| format!(" (from {s})")).unwrap_or_default();
            return Err(HomeError::Board(format!(
                "no board {}{from}; `kanban boards list` shows the boards, `kanban boards create {}` makes it",
                home.board(),
                home.board()
            )));
        }
        Ok(home)
    }

    /// The board `boards switch` chose, when one is written down.
    pub fn current_board(&self) -> Result<Option<BoardSlug>, HomeError> {
        let path = self.current_board_file();
        let text = match read_small(&path) {
            Ok(text) => text,
            // No home yet, or a home that is not a directory (which opening it refuses).
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => return Ok(None),
            Err(source) => {
                return Err(HomeError::Io {
                    path,
                    what: "cannot read the current board",
                    source,
                })
            }
        };
        match text.trim() {
            "" => Ok(None),
            slug => BoardSlug::parse(slug)
                .map(Some)
                .map_err(|e| HomeError::Board(format!("{}: {e}", path.display()))),
        }
    }

    /// Writes down the board later commands use when neither `--board` nor
    /// `$KANBAN_BOARD` names one; the default board clears it.
    pub fn set_current_board(&self, slug: &BoardSlug) -> Result<(), HomeError> {
        let path = self.current_board_file();
        let done = match slug.is_default() {
            true => std::fs::remove_file(&path).or_else(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Ok(()),
                _ => Err(e),
            }),
            false => safety::write_private(&path, format!("{slug}\n").as_bytes()),
        };
        done.map_err(|source| HomeError::Io {
            path,
            what: "cannot write the current board",
            source,
        })
    }

    /// Every board of the home, the default first and the rest by slug: the
    /// directories under `boards/` with a valid slug.
    pub fn boards(&self) -> Result<Vec<BoardSlug>, HomeError> {
        let mut found = vec![BoardSlug::default_board()];
        let entries = match std::fs::read_dir(self.boards_dir()) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
            Err(source) => {
                return Err(HomeError::Io {
                    path: self.boards_dir(),
                    what: "cannot list the boards",
                    source,
                })
            }
        };
        let mut others: Vec<BoardSlug> = entries
            .filter_map(Result::ok)
            .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                let slug = BoardSlug::parse(&name).ok()?;
                (slug.as_str() == name && !slug.is_default()).then_some(slug)
            })
            .collect();
        others.sort();
        found.extend(others);
        Ok(found)
    }

    /// This board's `board.json`, or what a board without one is shown as.
    pub fn board_meta(&self) -> BoardMeta {
        let path = self.board_dir().join(BOARD_FILE);
        let mut meta: BoardMeta = read_small(&path)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default();
        if meta.name.trim().is_empty() {
            meta.name = self.board().title();
        }
        meta
    }

    /// Writes this board's `board.json` (its directory made when new).
    pub fn write_board_meta(&self, meta: &BoardMeta) -> Result<(), HomeError> {
        let io = |what| {
            let path = self.board_dir();
            move |source| HomeError::Io { path, what, source }
        };
        if !self.board().is_default() {
            safety::private_dir(&self.boards_dir()).map_err(io("cannot make the boards' directory"))?;
            safety::private_dir(&self.board_dir()).map_err(io("cannot make the board's directory"))?;
        }
        let text = serde_json::to_string_pretty(meta).unwrap_or_default();
        safety::write_private(&self.board_dir().join(BOARD_FILE), format!("{text}\n").as_bytes())
            .map_err(io("cannot write board.json"))
    }

    /// Removes this board, keeping it (`kanban boards rm`): on PostgreSQL its schema is
    /// renamed ([`BoardSlug::archived_schema`]), then its directory is moved under
    /// `boards/_archived/`; the current board, when it was this one, is the default
    /// again. The caller has checked its running work and closed its store.
    pub fn remove_board(&self, config: &crate::Config, now: i64) -> Result<Removed, HomeError> {
        if self.board().is_default() {
            return Err(HomeError::Board("the default board cannot be removed".into()));
        }
        if !self.board_exists() {
            return Err(HomeError::Board(format!("no board {}", self.board())));
        }
        let schema = match &config.database_url {
            Some(url) => {
                let options = board_postgres::Options {
                    max_connections: 1,
                    ..self.postgres_options(format!("kanban pid {} boards rm", std::process::id()))
                };
                let to = self.board().archived_schema(now);
                board_postgres::PgStore::open(url.expose(), &options)?
                    .rename_schema(&to)
                    .map_err(|e| HomeError::Board(format!("cannot keep the board's schema: {e}")))?;
                Some(to)
            }
            None => None,
        };
        let kept = self.archive_board_dir(now)?;
        if self.current_board()?.as_ref() == Some(self.board()) {
            self.set_current_board(&BoardSlug::default_board())?;
        }
        Ok(Removed { kept, schema })
    }

    /// Moves this board's directory under `boards/_archived/` as `SLUG-TIME` (a number
    /// after it when taken) and returns where it went. The default board is never moved.
    fn archive_board_dir(&self, now: i64) -> Result<PathBuf, HomeError> {
        let io = |what| {
            let path = self.board_dir();
            move |source| HomeError::Io { path, what, source }
        };
        let archived = self.boards_dir().join(ARCHIVED_DIR);
        safety::private_dir(&archived).map_err(io("cannot make the archive's directory"))?;
        let mut target = archived.join(format!("{}-{now}", self.board()));
        let mut n = 1;
        while std::fs::symlink_metadata(&target).is_ok() {
            target = archived.join(format!("{}-{now}-{n}", self.board()));
            n += 1;
        }
        std::fs::rename(self.board_dir(), &target).map_err(io("cannot archive the board"))?;
        Ok(target)
    }
}

/// Where a removed board was kept.
#[derive(Clone, Debug, Serialize)]
pub struct Removed {
    /// Its directory under `boards/_archived/`.
    pub kept: PathBuf,
    /// Its schema's new name, on PostgreSQL.
    pub schema: Option<String>,
}

/// A small file of the home, never through a link.
fn read_small(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    safety::open_read(path)?
        .take(MAX_META_BYTES)
        .read_to_string(&mut text)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_follow_hermes_rule() {
        for good in ["default", "atm10-server", "a", "x_1", &"a".repeat(64), " Ops "] {
            assert!(BoardSlug::parse(good).is_ok(), "{good}");
        }
        assert_eq!(BoardSlug::parse(" Ops ").unwrap().as_str(), "ops");
        for bad in ["", "-a", "_a", "..", "a/b", "a.b", "a b", &"a".repeat(65), "é"] {
            assert!(BoardSlug::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn titles_and_schemas_come_from_the_slug() {
        let slug = BoardSlug::parse("atm10-server_x").unwrap();
        assert_eq!(slug.title(), "Atm10 Server X");
        assert_eq!(slug.schema().as_deref(), Some("kanban_atm10-server_x"));
        assert_eq!(BoardSlug::default_board().schema(), None);
        let long = |tail: char| BoardSlug::parse(&format!("{}{tail}", "a".repeat(63))).unwrap();
        let (one, two) = (long('b').schema().unwrap(), long('c').schema().unwrap());
        assert!(one.len() <= 63 && two.len() <= 63 && one != two, "{one} {two}");
        assert!(long('b').archived_schema(1_800_000_000).len() <= 63);
    }
}
