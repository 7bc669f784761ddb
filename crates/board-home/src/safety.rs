//! The home's own files, owned by us and no one else: the check that a home, its
//! `config.yaml`, `kanban.db`, `logs/` and `workspaces/` belong to the current user and
//! are not writable by group or others (someone who can write there can choose the
//! commands we run), directories created 0700 and checked after creation, files opened
//! without following symlinks, and atomic writes through uniquely named `O_EXCL` temp
//! files.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::boards::{BOARDS_DIR, BOARD_FILE};
use crate::{CONFIG_FILE, DATABASE_FILE, LOGS_DIR, WORKSPACES_DIR};

/// A home (or a file in it) that another user could have chosen or could change.
#[derive(Debug, thiserror::Error)]
pub enum UnsafeHome {
    #[error("{}: owned by uid {owner}, not by you (uid {me}); use a home of your own", path.display())]
    NotOurs { path: PathBuf, owner: u32, me: u32 },
    #[error("{}: writable by group or others; run chmod {fix} {}", path.display(), path.display())]
    Writable { path: PathBuf, fix: &'static str },
    #[error("{}: a symbolic link; the home's files must not be links", path.display())]
    Symlink { path: PathBuf },
    #[error("{}: readable by group or others, and it holds a secret; run chmod 600 {}", path.display(), path.display())]
    Readable { path: PathBuf },
    #[error("{}: {what}", path.display())]
    NotKind { path: PathBuf, what: &'static str },
    #[error("{}: cannot check it: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
}

impl From<UnsafeHome> for std::io::Error {
    fn from(e: UnsafeHome) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::PermissionDenied, e.to_string())
    }
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and touches no memory.
    unsafe { libc::geteuid() }
}

/// Refuses `meta` unless we own it and group and others cannot write it.
fn check_owned(path: &Path, meta: &Metadata) -> Result<(), UnsafeHome> {
    let me = euid();
    if meta.uid() != me {
        return Err(UnsafeHome::NotOurs {
            path: path.to_path_buf(),
            owner: meta.uid(),
            me,
        });
    }
    if meta.permissions().mode() & 0o022 != 0 {
        let fix = if meta.is_dir() { "700" } else { "600" };
        return Err(UnsafeHome::Writable {
            path: path.to_path_buf(),
            fix,
        });
    }
    Ok(())
}

/// Checks what of a home exists: the home itself (which may be reached through a link),
/// then `config.yaml`, `kanban.db` (whoever can replace it rewrites the board), `logs/`
/// and `workspaces/`, none of which may be a link.
pub fn check_home(home: &Path) -> Result<(), UnsafeHome> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| UnsafeHome::Io { path, source }
    };
    let meta = std::fs::metadata(home).map_err(io(home))?;
    if !meta.is_dir() {
        return Err(UnsafeHome::NotKind {
            path: home.to_path_buf(),
            what: "the home is not a directory",
        });
    }
    check_owned(home, &meta)?;
    check_entries(
        home,
        &[CONFIG_FILE, DATABASE_FILE, LOGS_DIR, WORKSPACES_DIR, BOARDS_DIR],
    )
}

/// Checks a board's directory under `boards/` as [`check_home`] checks the home: the
/// directory, its `kanban.db`, `board.json`, `logs/` and `workspaces/`, none a link.
pub fn check_board_dir(dir: &Path) -> Result<(), UnsafeHome> {
    check_entries(dir, &["", DATABASE_FILE, BOARD_FILE, LOGS_DIR, WORKSPACES_DIR])
}

fn check_entries(dir: &Path, names: &[&str]) -> Result<(), UnsafeHome> {
    for name in names {
        let path = if name.is_empty() {
            dir.to_path_buf()
        } else {
            dir.join(name)
        };
        match std::fs::symlink_metadata(&path) {
            Ok(meta) => check_entry(&path, &meta)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(UnsafeHome::Io { path, source }),
        }
    }
    Ok(())
}

fn check_entry(path: &Path, meta: &Metadata) -> Result<(), UnsafeHome> {
    if meta.file_type().is_symlink() {
        return Err(UnsafeHome::Symlink {
            path: path.to_path_buf(),
        });
    }
    check_owned(path, meta)
}

/// Creates `dir` (its parent must exist) owner-only, or accepts it when it is already
/// there as a real directory that we own and no one else can write; never follows a
/// link in its place. Returns whether it was created now.
pub fn private_dir(dir: &Path) -> std::io::Result<bool> {
    let created = match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
        Err(e) => return Err(e),
    };
    let meta = std::fs::symlink_metadata(dir)?;
    check_entry(dir, &meta)?;
    if !meta.is_dir() {
        return Err(UnsafeHome::NotKind {
            path: dir.to_path_buf(),
            what: "not a directory",
        }
        .into());
    }
    Ok(created)
}

/// Creates `dir` (its parent must exist) for a worker that runs as `uid`: like
/// [`private_dir`], but the directory is handed to `uid:gid` (mode 0700), and one that
/// `uid` already owns is accepted. The ownership changes through a descriptor opened
/// without following a link, so a link swapped in is never followed.
pub fn worker_dir(dir: &Path, uid: u32, gid: u32) -> std::io::Result<()> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let handle = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)
        .map_err(naming(dir))?;
    let meta = handle.metadata()?;
    if meta.uid() != uid {
        check_owned(dir, &meta)?;
    } else if meta.permissions().mode() & 0o022 != 0 {
        return Err(UnsafeHome::Writable {
            path: dir.to_path_buf(),
            fix: "700",
        }
        .into());
    }
    std::os::unix::fs::fchown(&handle, Some(uid), Some(gid))?;
    Ok(())
}

/// Options that never follow a symlink at the last component and create owner-only.
fn no_follow() -> OpenOptions {
    let mut options = OpenOptions::new();
    options
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    options
}

/// Opens a file of the home for appending (creating it 0600), refusing a link.
pub fn open_append(path: &Path) -> std::io::Result<File> {
    open_checked(path, |o| o.create(true).append(true))
}

/// Rotates a log of the home before a writer appends to it: when the file at `path` is
/// longer than `max` bytes, `path.N` becomes `path.N+1` for each kept backup (the oldest
/// beyond `backups` replaced) and `path` becomes `path.1`; with no backups it is
/// removed. A link or anything but a file is left alone (`open_append` refuses it);
/// a rename moves a link itself, never what it points at.
pub fn rotate_log(path: &Path, max: u64, backups: u32) -> std::io::Result<()> {
    let len = match std::fs::symlink_metadata(path) {
        Ok(found) if found.file_type().is_file() => found.len(),
        Ok(_) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if len <= max {
        return Ok(());
    }
    if backups == 0 {
        return std::fs::remove_file(path);
    }
    let numbered = |n: u32| {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    };
    for n in (1..backups).rev() {
        match std::fs::rename(numbered(n), numbered(n + 1)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    std::fs::rename(path, numbered(1))
}

/// Opens a file of the home for reading, refusing a link.
pub fn open_read(path: &Path) -> std::io::Result<File> {
    open_checked(path, |o| o.read(true))
}

/// The end of a log of the home, at most `max` bytes from `from` on (lossy UTF-8), opened
/// without following a link (a worker cannot point its log at a file of the gateway's
/// user): an attempt's own output for the gateway, a running card's for the web board.
/// When the log holds more than that, the text starts at a line.
pub fn read_tail(path: &Path, from: u64, max: u64) -> std::io::Result<String> {
    let mut file = open_read(path)?;
    let len = file.metadata()?.len();
    let start = from.max(len.saturating_sub(max));
    let bytes = read_at(&mut file, start, max)?;
    let text = String::from_utf8_lossy(&bytes);
    let cut = if start > from {
        text.find('\n').map_or(0, |i| i + 1)
    } else {
        0
    };
    Ok(text[cut..].to_owned())
}

/// At most `max` bytes of `file` from `start` on.
fn read_at(file: &mut File, start: u64, max: u64) -> std::io::Result<Vec<u8>> {
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// At most `max` bytes of a log of the home from `from` on, or its last `max` bytes for
/// no `from`, opened without following a link: what a reader following the log (the web
/// board's live tail) reads next. A log shorter than `from` was rotated and begun again;
/// it is read from its start.
pub fn read_span(path: &Path, from: Option<u64>, max: u64) -> std::io::Result<board_core::shapes::LogSpan> {
    let mut file = open_read(path)?;
    let len = file.metadata()?.len();
    let start = match from {
        Some(from) if from <= len => from,
        Some(_) => 0,
        None => len.saturating_sub(max),
    };
    let bytes = read_at(&mut file, start, max)?;
    Ok(board_core::shapes::LogSpan { start, bytes })
}

/// Opens (creating it 0600) a file of the home for writing in place, without truncating
/// it and refusing a link; for lock files.
pub fn open_lock(path: &Path) -> std::io::Result<File> {
    open_checked(path, |o| o.create(true).truncate(false).write(true))
}

/// Opens without following a link, then refuses anything but a regular file of ours.
fn open_checked(
    path: &Path,
    how: impl FnOnce(&mut OpenOptions) -> &mut OpenOptions,
) -> std::io::Result<File> {
    let file = how(&mut no_follow()).open(path).map_err(naming(path))?;
    check_regular(path, &file)?;
    Ok(file)
}

/// An open error that names the file; a refused link says so rather than "too many
/// levels of symbolic links".
fn naming(path: &Path) -> impl FnOnce(std::io::Error) -> std::io::Error + '_ {
    move |e| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            return UnsafeHome::Symlink {
                path: path.to_path_buf(),
            }
            .into();
        }
        std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
    }
}

fn check_regular(path: &Path, file: &File) -> std::io::Result<()> {
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(UnsafeHome::NotKind {
            path: path.to_path_buf(),
            what: "not a regular file",
        }
        .into());
    }
    check_owned(path, &meta)?;
    Ok(())
}

/// Replaces `path` owner-only and atomically (a reader never sees half of it): the bytes
/// go to a new, uniquely named temp file beside it (`O_EXCL`, so nothing planted there
/// is opened), which is then renamed over `path` (a link at `path` is replaced, not
/// followed).
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_replacing(path, bytes, 0o600)
}

/// [`write_private`] for a file others may read (`mode`, less the umask): a systemd
/// unit, which lives outside the home.
pub fn write_replacing(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    replace(path, bytes, mode, true)
}

/// [`write_private`] for a report rewritten every few milliseconds (the gateway's
/// status, at each tick): replaced as atomically, but not flushed to the disk first. A
/// crash may leave the last report unwritten; the next one is a tick away, and a flush
/// per tick would cost the gateway a disk round trip each time.
pub fn write_report(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    replace(path, bytes, 0o600, false)
}

fn replace(path: &Path, bytes: &[u8], mode: u32, durable: bool) -> std::io::Result<()> {
    let tmp = unique_temp(path)?;
    let written = no_follow()
        .mode(mode)
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            if durable {
                f.sync_data()?;
            }
            Ok(())
        })
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Creates `path` owner-only with `bytes` unless something is there already (returns
/// whether it made it), atomically: the bytes go to a uniquely named temp file that is
/// then hard-linked to `path`, which fails when `path` exists. A process reading the
/// file while another makes it sees no file or the whole file, never a part of it.
pub fn create_private(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    // Nothing to write in a home that has the file, even one that is read-only now.
    if std::fs::symlink_metadata(path).is_ok() {
        return Ok(false);
    }
    let tmp = unique_temp(path)?;
    let linked = no_follow()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_data()))
        .and_then(|()| match std::fs::hard_link(&tmp, path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        });
    let _ = std::fs::remove_file(&tmp);
    linked
}

fn unique_temp(path: &Path) -> std::io::Result<PathBuf> {
    let mut random = [0u8; 8];
    getrandom::fill(&mut random).map_err(|e| std::io::Error::other(format!("no randomness: {e}")))?;
    let suffix: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let name = path
        .file_name()
        .map_or_else(Default::default, |n| n.to_string_lossy());
    Ok(path.with_file_name(format!(".{name}.{suffix}.tmp")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, bytes: usize) {
        std::fs::write(path, vec![b'x'; bytes]).unwrap();
    }

    fn len(path: &Path) -> Option<u64> {
        std::fs::symlink_metadata(path).ok().map(|m| m.len())
    }

    /// The gateway's status (written unflushed) is replaced whole, owner-only, over a
    /// link rather than through it, and leaves no temp file behind.
    #[test]
    fn a_report_replaces_its_file_owner_only_and_never_through_a_link() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.json");
        write_report(&path, b"one").unwrap();
        write_report(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let elsewhere = dir.path().join("elsewhere");
        write(&elsewhere, 3);
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        write_report(&path, b"three").unwrap();
        assert_eq!(std::fs::read(&elsewhere).unwrap(), b"xxx");
        assert_eq!(std::fs::read(&path).unwrap(), b"three");
        assert!(!std::fs::symlink_metadata(&path).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn a_log_over_its_size_is_rotated_keeping_its_backups() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("t_1.log");
        let backup = |n: u32| dir.path().join(format!("t_1.log.{n}"));
        rotate_log(&log, 10, 2).unwrap();
        assert_eq!(len(&log), None, "no log yet: nothing to do");
        write(&log, 10);
        rotate_log(&log, 10, 2).unwrap();
        assert_eq!(len(&log), Some(10), "at the limit: kept");
        for size in [11, 12, 13] {
            write(&log, size);
            rotate_log(&log, 10, 2).unwrap();
        }
        assert_eq!(
            (len(&log), len(&backup(1)), len(&backup(2)), len(&backup(3))),
            (None, Some(13), Some(12), None)
        );
        write(&log, 20);
        rotate_log(&log, 10, 0).unwrap();
        assert_eq!(len(&log), None, "no backups: removed");
        std::os::unix::fs::symlink("/etc/passwd", &log).unwrap();
        rotate_log(&log, 0, 2).unwrap();
        assert!(
            std::fs::symlink_metadata(&log).unwrap().file_type().is_symlink(),
            "a link is left alone"
        );
    }
}
