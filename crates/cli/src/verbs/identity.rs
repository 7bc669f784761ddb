//! Who is calling: the name a comment's author, a task's `created_by` and `list --mine`
//! default to.

use board_home::worker_variables as vars;

/// Inside a worker (`KANBAN_TASK` and `KANBAN_RUN_ID` set) its profile, `KANBAN_PROFILE`;
/// else the user's login name, `$USER`, else `$LOGNAME`, else the uid.
/// The profile `--mine` means: `$KANBAN_PROFILE`, else Hermes' `$HERMES_PROFILE` (set
/// or not inside a worker), else the caller ([`caller`]).
pub fn my_profile() -> String {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    var(vars::PROFILE)
        .or_else(|| var("HERMES_PROFILE"))
        .unwrap_or_else(caller)
}

pub fn caller() -> String {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let in_worker = var(vars::TASK).is_some() && var(vars::RUN).is_some();
    in_worker
        .then(|| var(vars::PROFILE))
        .flatten()
        .or_else(|| var("USER"))
        .or_else(|| var("LOGNAME"))
        // SAFETY: getuid cannot fail and touches no memory of ours.
        .unwrap_or_else(|| unsafe { libc::getuid() }.to_string())
}
