//! What a worker may hold: the user it runs as, no capability when the gateway has some,
//! and no descriptor of the gateway's but its channel. Everything here but the checks of
//! this process's own capabilities runs between a worker's clone and its exec, so it
//! makes only system calls on values prepared before the clone.

use std::os::fd::RawFd;

use crate::channel;

/// What a worker's start does between its clone and its exec (see `launch`): every
/// inherited descriptor but the channel closes at exec, then the switch to the profile's
/// user (`ids`) and, for a worker that stays a gateway's user holding capabilities
/// (`strip`), dropping them all. Only system calls, on values prepared before the clone.
pub(super) fn in_child(
    channel_fd: Option<RawFd>,
    ids: Option<&(u32, u32, Vec<u32>)>,
    strip: bool,
) -> std::io::Result<()> {
    // Descriptors the gateway holds, its own or inherited from whoever started it,
    // close at exec: the worker gets stdio and its channel only.
    close_at_exec_from(3)?;
    if let Some(fd) = channel_fd {
        channel::inherit_in_child(fd)?;
    }
    if let Some((uid, gid, groups)) = ids {
        become_user(*uid, *gid, groups)?;
    }
    if strip {
        drop_capabilities()?;
    }
    Ok(())
}

/// Whether this process holds CAP_SETUID and CAP_SETGID (root does).
pub(super) fn may_switch_users() -> bool {
    const CAP_SETGID: u32 = 6;
    const CAP_SETUID: u32 = 7;
    let effective = effective_capabilities();
    [CAP_SETGID, CAP_SETUID]
        .iter()
        .all(|bit| effective & (1 << bit) != 0)
}

/// This process's effective capability set (`CapEff` of `/proc/self/status`).
fn effective_capabilities() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0)
}

/// Whether this process holds any capability (root does): then its workers without a
/// `user` are started with none. Read once: a process's capabilities are what it
/// started with.
pub fn holds_capabilities() -> bool {
    static HOLDS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HOLDS.get_or_init(|| effective_capabilities() != 0)
}

/// Leaves the (cloned) worker no capability and no way to regain one: root's exec grants
/// nothing (`SECBIT_NOROOT`, locked), the bounding set is empty, no ambient capability,
/// the permitted, effective and inheritable sets are cleared, and `no_new_privs` stops
/// set-user-id and file-capability programs. Any step that fails fails the spawn.
fn drop_capabilities() -> std::io::Result<()> {
    // <linux/securebits.h>: NOROOT (bit 0), NO_SETUID_FIXUP (2) and NO_CAP_AMBIENT_RAISE
    // (6) set, KEEP_CAPS (4) clear, each locked (the bit above it).
    const SECUREBITS: libc::c_ulong = 1 << 0 | 1 << 1 | 1 << 2 | 1 << 3 | 1 << 5 | 1 << 6 | 1 << 7;
    /// _LINUX_CAPABILITY_VERSION_3: two 32-bit words per set.
    const VERSION_3: u32 = 0x2008_0522;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let check = |rc: libc::c_long| succeeded(rc as libc::c_int);
    // SAFETY: prctl and capset change this (cloned) process's credentials; capset reads
    // the two structures given, which live for the call.
    unsafe {
        check(libc::prctl(libc::PR_SET_SECUREBITS, SECUREBITS, 0, 0, 0).into())?;
        // Every capability the kernel knows: drop until it says there is no such one.
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
                    break;
                }
                return Err(std::io::Error::last_os_error());
            }
        }
        check(libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0).into())?;
        let header = Header {
            version: VERSION_3,
            pid: 0,
        };
        let none = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        check(libc::syscall(libc::SYS_capset, &header, none.as_ptr()))?;
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0).into())?;
    }
    Ok(())
}

/// Marks every descriptor from `first` up close-on-exec (`close_range` with
/// `CLOSE_RANGE_CLOEXEC`, or one `fcntl` each up to the descriptor limit on a kernel
/// without it). Marking rather than closing keeps the descriptor through which the
/// standard library reports a failed exec.
fn close_at_exec_from(first: libc::c_uint) -> std::io::Result<()> {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range, getrlimit and fcntl change only this (cloned) process's
    // descriptor flags; getrlimit writes one rlimit we own.
    unsafe {
        if libc::syscall(
            libc::SYS_close_range,
            first,
            libc::c_uint::MAX,
            CLOSE_RANGE_CLOEXEC,
        ) == 0
        {
            return Ok(());
        }
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        succeeded(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit))?;
        let last = limit.rlim_cur.min(1 << 20) as libc::c_int;
        for fd in first as libc::c_int..last {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
    Ok(())
}

/// A system call's 0 as success, anything else as the error it left in `errno`.
pub(super) fn succeeded(rc: libc::c_int) -> std::io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Drops to `uid` with its groups, for good (real, effective and saved ids). The system
/// calls themselves, not the C library's wrappers: in a child that shares the gateway's
/// memory those would take it for the multi-threaded gateway and signal the gateway's
/// threads to change their credentials too.
fn become_user(uid: u32, gid: u32, groups: &[u32]) -> std::io::Result<()> {
    let check = |rc: libc::c_long| succeeded(rc as libc::c_int);
    // SAFETY: each call changes this (cloned) process's credentials only and reads
    // `groups` for its length.
    unsafe {
        check(libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()))?;
        check(libc::syscall(libc::SYS_setresgid, gid, gid, gid))?;
        check(libc::syscall(libc::SYS_setresuid, uid, uid, uid))?;
    }
    Ok(())
}
