//! A task's files in its worker's workspace: `attachments/NAME`, written before the
//! worker starts. The directory is made (or accepted) without following a link, and each
//! file is created through the directory's descriptor with `O_NOFOLLOW`, so nothing a
//! worker left in its workspace (a link named like a file, a link in place of the
//! directory) steers a write out of it; a name is written only when it is a plain file
//! name, as the board keeps them.

use std::ffi::CString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use board_home::safety::{private_dir, worker_dir};

/// The directory of a workspace that holds its task's files.
const FILES_DIR: &str = "attachments";

/// One file of the task, for its worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerFile {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// Writes `files` into `workspace/attachments/`, handed to `owner` (uid, gid) when the
/// worker runs as another user.
pub(super) fn place(
    workspace: &Path,
    files: &[WorkerFile],
    owner: Option<(u32, u32)>,
) -> std::io::Result<()> {
    if files.is_empty() {
        return Ok(());
    }
    let dir_path = workspace.join(FILES_DIR);
    match owner {
        Some((uid, gid)) => worker_dir(&dir_path, uid, gid)?,
        None => {
            private_dir(&dir_path)?;
        }
    }
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&dir_path)?;
    for file in files {
        let plain = board_core::attachments::file_name(&file.name).is_ok_and(|n| n == file.name);
        if !plain {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("a file named {:?} is not a plain file name", file.name),
            ));
        }
        let name = CString::new(file.name.as_bytes())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: `dir` is an open directory and `name` a NUL-terminated plain name.
        let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, 0o600) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            return Err(std::io::Error::new(
                e.kind(),
                format!("{FILES_DIR}/{}: {e}", file.name),
            ));
        }
        // SAFETY: `fd` was just opened and is owned here alone.
        let mut out = unsafe { File::from_raw_fd(fd) };
        if !out.metadata()?.is_file() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{FILES_DIR}/{} is not a regular file", file.name),
            ));
        }
        out.write_all(&file.bytes)?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::fchown(&out, Some(uid), Some(gid))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, bytes: &[u8]) -> WorkerFile {
        WorkerFile {
            name: name.into(),
            bytes: bytes.to_vec(),
        }
    }

    #[test]
    fn files_land_in_the_workspace_and_never_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("ws");
        std::fs::create_dir(&workspace).unwrap();
        place(&workspace, &[file("a.txt", b"one"), file("b (1).bin", b"")], None).unwrap();
        assert_eq!(
            std::fs::read(workspace.join("attachments/a.txt")).unwrap(),
            b"one"
        );
        assert!(workspace.join("attachments/b (1).bin").exists());
        // Written again over what a worker left: a file is rewritten, a link refused.
        std::fs::write(workspace.join("attachments/a.txt"), b"changed").unwrap();
        place(&workspace, &[file("a.txt", b"one")], None).unwrap();
        assert_eq!(
            std::fs::read(workspace.join("attachments/a.txt")).unwrap(),
            b"one"
        );
        let outside = dir.path().join("outside");
        std::fs::write(&outside, b"mine").unwrap();
        std::os::unix::fs::symlink(&outside, workspace.join("attachments/c.txt")).unwrap();
        assert!(place(&workspace, &[file("c.txt", b"x")], None).is_err());
        assert_eq!(std::fs::read(&outside).unwrap(), b"mine");
        // A link in place of the directory, and a name that is a path, are refused.
        let other = dir.path().join("other");
        std::fs::create_dir(&other).unwrap();
        let ws2 = dir.path().join("ws2");
        std::fs::create_dir(&ws2).unwrap();
        std::os::unix::fs::symlink(&other, ws2.join("attachments")).unwrap();
        assert!(place(&ws2, &[file("d.txt", b"x")], None).is_err());
        assert!(!other.join("d.txt").exists());
        assert!(place(&workspace, &[file("../e.txt", b"x")], None).is_err());
        assert!(!workspace.join("e.txt").exists());
    }
}
