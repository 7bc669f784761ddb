//! Starting a worker without copying the gateway. A `fork` of the gateway copies its page
//! tables and leaves both processes to fault in copies of every page either writes until
//! the child execs; the child here instead borrows the gateway's memory and a stack of
//! its own (`clone` with `CLONE_VM | CLONE_VFORK`, as `posix_spawn` does) and the spawning
//! thread waits until it has exec'd or failed. The child only makes system calls on
//! values prepared before the clone: it must not allocate, lock or touch the gateway's
//! state, since that memory is the gateway's own.

use std::ffi::{CString, OsStr};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::privileges::{self, succeeded};
use crate::process::{copy_above_stdio, reap};

/// The child's own stack: it makes a few dozen system calls and nothing deep.
const CHILD_STACK: usize = 64 * 1024;

/// Everything a worker's start needs, prepared in the gateway before the clone.
pub(super) struct Launch {
    program: CString,
    /// `argv` and `envp` own the strings the pointer arrays point into.
    _argv: Vec<CString>,
    argv_ptrs: Vec<*const libc::c_char>,
    _envp: Vec<CString>,
    envp_ptrs: Vec<*const libc::c_char>,
    cwd: CString,
    /// Descriptors for the worker's standard input, output and error, each above 2, so
    /// placing one on 0, 1 or 2 never replaces another still to be placed.
    stdio: [OwnedFd; 3],
    channel: Option<RawFd>,
    ids: Option<(u32, u32, Vec<u32>)>,
    strip: bool,
}

/// What the worker is to be: program, arguments, environment, directory and output.
pub(super) struct Plan<'a> {
    pub program: &'a str,
    pub args: &'a [String],
    pub env: &'a [(String, String)],
    pub cwd: &'a Path,
    pub output: &'a std::fs::File,
    pub channel: Option<RawFd>,
    pub ids: Option<(u32, u32, Vec<u32>)>,
    pub strip: bool,
}

impl Launch {
    /// Prepares a start: resolves the program as `execvp` would with the worker's own
    /// `PATH`, and makes every C string and descriptor the child will use.
    pub(super) fn prepare(plan: Plan<'_>) -> std::io::Result<Launch> {
        let path = plan
            .env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_str());
        let program = resolve(plan.program, path, plan.cwd)?;
        let c = |bytes: &[u8]| {
            CString::new(bytes).map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "a NUL byte in the worker's command",
                )
            })
        };
        let argv = std::iter::once(plan.program.as_bytes())
            .chain(plan.args.iter().map(|a| a.as_bytes()))
            .map(c)
            .collect::<std::io::Result<Vec<_>>>()?;
        let envp = plan
            .env
            .iter()
            .map(|(k, v)| c(format!("{k}={v}").as_bytes()))
            .collect::<std::io::Result<Vec<_>>>()?;
        let null = std::fs::File::open("/dev/null")?;
        let stdio = [
            copy_above_stdio(null.as_raw_fd())?,
            copy_above_stdio(plan.output.as_raw_fd())?,
            copy_above_stdio(plan.output.as_raw_fd())?,
        ];
        Ok(Launch {
            program: c(program.as_os_str().as_bytes())?,
            argv_ptrs: pointers(&argv),
            _argv: argv,
            envp_ptrs: pointers(&envp),
            _envp: envp,
            cwd: c(plan.cwd.as_os_str().as_bytes())?,
            stdio,
            channel: plan.channel,
            ids: plan.ids,
            strip: plan.strip,
        })
    }

    /// Starts the worker; its pid once it has exec'd. A child that could not exec is
    /// reaped and its reason returned.
    pub(super) fn start(&self) -> std::io::Result<libc::pid_t> {
        let mut stack = vec![0u8; CHILD_STACK];
        let mut shared = Shared {
            launch: self,
            errno: 0,
        };
        // The top of the stack (it grows down), aligned to 16 bytes as the ABI asks.
        let top = (stack.as_mut_ptr() as usize + CHILD_STACK) & !15;
        // SAFETY: every signal is blocked across the clone so that no handler of the
        // gateway's runs in the child, which shares its memory; the old mask is restored
        // at once after. `child` runs on `stack`, which outlives it: CLONE_VFORK suspends
        // this thread until the child has exec'd or exited, and `shared` lives as long.
        let pid = unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            let pid = libc::clone(
                child,
                top as *mut libc::c_void,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                (&mut shared as *mut Shared<'_>).cast(),
            );
            let clone_error = std::io::Error::last_os_error();
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            if pid < 0 {
                return Err(clone_error);
            }
            pid
        };
        drop(stack);
        if shared.errno != 0 {
            let _ = reap(pid);
            return Err(std::io::Error::from_raw_os_error(shared.errno));
        }
        Ok(pid)
    }
}

/// What the child reads (the launch) and writes (why it could not exec).
struct Shared<'a> {
    launch: &'a Launch,
    errno: libc::c_int,
}

/// The child: places its descriptors, joins a group of its own, drops what it must not
/// hold, and execs. Never returns: a failed step leaves its errno for the parent and
/// exits 127.
extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `Shared`, alive and untouched while the parent waits.
    let shared = unsafe { &mut *arg.cast::<Shared<'_>>() };
    let Err(e) = become_worker(shared.launch);
    shared.errno = e.raw_os_error().filter(|n| *n != 0).unwrap_or(libc::ENOEXEC);
    // SAFETY: _exit ends this child alone (it is a process of its own) without running
    // anything of the gateway's.
    unsafe { libc::_exit(127) }
}

/// Everything between the clone and the exec; returns only when a step or the exec
/// failed, with why.
fn become_worker(l: &Launch) -> std::io::Result<std::convert::Infallible> {
    // SAFETY: system calls on this (cloned) process and on values prepared before the
    // clone: signal dispositions, descriptors, directory, credentials, then execve with
    // NUL-terminated arrays of pointers into live C strings.
    unsafe {
        default_signals();
        succeeded(libc::setpgid(0, 0))?;
        for (fd, target) in l.stdio.iter().zip(0..) {
            if libc::dup2(fd.as_raw_fd(), target) < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        succeeded(libc::chdir(l.cwd.as_ptr()))?;
        privileges::in_child(l.channel, l.ids.as_ref(), l.strip)?;
        let none: libc::sigset_t = std::mem::zeroed();
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::execve(l.program.as_ptr(), l.argv_ptrs.as_ptr(), l.envp_ptrs.as_ptr());
    }
    Err(std::io::Error::last_os_error())
}

/// Every signal the gateway handles goes back to its default, and SIGPIPE too (the
/// gateway ignores it; a worker expects to die of it): a handler of the gateway's must
/// never run in the child, and the exec keeps what is ignored.
///
/// # Safety
/// Called in the cloned child only, with every signal blocked.
unsafe fn default_signals() {
    for sig in 1..=64 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
            continue;
        }
        if old.sa_sigaction != libc::SIG_IGN || sig == libc::SIGPIPE {
            let mut default: libc::sigaction = std::mem::zeroed();
            default.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &default, std::ptr::null_mut());
        }
    }
}

/// A NULL-terminated array of pointers into `strings`.
fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// The file `execvp` would run for `program`: a name with a slash as it is (relative to
/// the worker's directory), any other name the first executable file of that name in
/// `path` (the worker's `PATH`, or the system's default when it has none).
fn resolve(program: &str, path: Option<&str>, cwd: &Path) -> std::io::Result<PathBuf> {
    if program.is_empty() {
        return Err(std::io::ErrorKind::NotFound.into());
    }
    if program.contains('/') {
        return Ok(PathBuf::from(program));
    }
    let path = path.unwrap_or("/usr/local/bin:/usr/bin:/bin");
    let found = std::env::split_paths(OsStr::new(path))
        .map(|dir| match dir.as_os_str().is_empty() {
            true => cwd.join(program),
            false => dir.join(program),
        })
        .find(|candidate| {
            std::fs::metadata(candidate).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        });
    found.ok_or_else(|| std::io::ErrorKind::NotFound.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_found_on_the_workers_path_and_a_path_is_taken_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let tool = bin.join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        let plain = bin.join("plain");
        std::fs::write(&plain, "not a program").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("/nonexistent:{}", bin.display());
        assert_eq!(resolve("tool", Some(&path), dir.path()).unwrap(), tool);
        // Not executable: not a candidate.
        assert!(resolve("plain", Some(&path), dir.path()).is_err());
        assert_eq!(
            resolve("./x", Some(&path), dir.path()).unwrap(),
            PathBuf::from("./x")
        );
        assert!(resolve("sh", None, dir.path()).unwrap().is_absolute());
        assert_eq!(
            resolve("missing", Some(&path), dir.path()).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
    }

    fn run(program: &str, args: &[&str], env: &[(&str, &str)]) -> std::io::Result<(i32, String)> {
        let dir = tempfile::tempdir().unwrap();
        let out_path = dir.path().join("out");
        let out = std::fs::File::create(&out_path).unwrap();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let launch = Launch::prepare(Plan {
            program,
            args: &args,
            env: &env,
            cwd: dir.path(),
            output: &out,
            channel: None,
            ids: None,
            strip: false,
        })?;
        let pid = launch.start()?;
        let mut status = 0;
        // SAFETY: our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        Ok((
            libc::WEXITSTATUS(status),
            std::fs::read_to_string(out_path).unwrap(),
        ))
    }

    #[test]
    fn a_started_worker_has_its_directory_environment_output_and_group() {
        let (code, out) = run(
            "sh",
            &[
                "-c",
                "pwd; echo \"$WHO\"; test \"$(ps -o pgid= $$)\" -eq $$ && echo leader; exit 3",
            ],
            &[("PATH", "/usr/bin:/bin"), ("WHO", "worker")],
        )
        .unwrap();
        assert_eq!(code, 3);
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].starts_with(std::env::temp_dir().to_str().unwrap()),
            "{out}"
        );
        assert_eq!(&lines[1..], ["worker", "leader"], "{out}");
    }

    #[test]
    fn a_started_worker_has_no_signal_blocked_and_sigpipe_at_its_default() {
        // The program reads its own status as it was exec'd (a shell would block
        // signals around its own forks). SIGPIPE is ignored by this test process: a
        // worker gets it back at its default and dies of a closed pipe as any program.
        let (code, out) = run(
            "grep",
            &["-E", "^Sig(Blk|Ign)", "/proc/self/status"],
            &[("PATH", "/usr/bin:/bin")],
        )
        .unwrap();
        assert_eq!(code, 0, "{out}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "SigBlk:\t0000000000000000", "{out}");
        let ignored = u64::from_str_radix(lines[1].trim_start_matches("SigIgn:\t"), 16).unwrap();
        assert_eq!(ignored & 1 << (libc::SIGPIPE - 1), 0, "{out}");
    }

    #[test]
    fn a_program_that_cannot_start_is_the_exec_s_own_error() {
        // Found by name but not by exec: the child's errno comes back.
        let err = run("./no-such-program", &[], &[]).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
        let dir = tempfile::tempdir().unwrap();
        let err = run(dir.path().to_str().unwrap(), &[], &[]).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EACCES), "{err}");
    }
}
