//! Stopping a long-running verb (`events --follow`) cleanly on SIGINT or SIGTERM.
//!
//! The handler only sets an atomic flag, the one thing a signal handler may safely do;
//! the verb checks the flag between polls, so it never dies halfway through a line and
//! exits 0 like any finished command.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::failure::Failure;

static REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_signal: libc::c_int) {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Replaces the default (die at once) of SIGINT and SIGTERM with setting the flag.
pub fn install() -> Result<(), Failure> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; the handler
        // is an `extern "C" fn(c_int)` that only stores to an atomic, which is
        // async-signal-safe; the pointers passed are to locals we own.
        let rc = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(Failure::Refused(format!(
                "cannot install a signal handler: {}",
                std::io::Error::last_os_error()
            )));
        }
    }
    Ok(())
}

/// Whether SIGINT or SIGTERM arrived since `install`.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}
