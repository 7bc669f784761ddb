//! The Python virtualenv the test suites use to drive our binaries with clients we did not
//! write (see `xtask/test-requirements.txt`): `target/venv`, rebuilt when the requirements
//! change. Tests find its interpreter at `target/venv/bin/python`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::workspace_root;

const REQUIREMENTS: &str = include_str!("../test-requirements.txt");

/// Where the suites expect the virtualenv.
pub(crate) fn dir(root: &Path) -> PathBuf {
    root.join("target").join("venv")
}

/// Creates `target/venv` and installs the pinned requirements, unless the stamp says the
/// same requirements are already installed.
pub(crate) fn ensure() -> Result<(), String> {
    let root = workspace_root();
    let venv = dir(&root);
    let stamp = venv.join("requirements.installed");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == REQUIREMENTS) {
        return Ok(());
    }
    let python = venv.join("bin").join("python");
    if !python.exists() {
        crate::run("python3", &["-m", "venv", &venv.to_string_lossy()])
            .map_err(|e| format!("{e}; the test suites need python3 with venv (Debian: python3-venv)"))?;
    }
    let packages: Vec<&str> = REQUIREMENTS
        .lines()
        .map(|line| line.split('#').next().unwrap_or("").trim())
        .filter(|line| !line.is_empty())
        .collect();
    if !packages.is_empty() {
        let mut args = vec!["-m", "pip", "install", "--quiet", "--disable-pip-version-check"];
        args.extend(&packages);
        crate::run(&python.to_string_lossy(), &args)?;
    }
    std::fs::write(&stamp, REQUIREMENTS).map_err(|e| format!("{}: {e}", stamp.display()))?;
    check(&python)
}

fn check(python: &Path) -> Result<(), String> {
    let status = Command::new(python)
        .args(["-c", "import sys; sys.exit(0)"])
        .status()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} does not run ({status})", python.display()))
    }
}
