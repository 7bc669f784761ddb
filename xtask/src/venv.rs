//! What the test suites need from the package registries: the Python virtualenv they use
//! to drive our binaries with clients we did not
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
    python_packages(&root)?;
    axe_core(&root)
}

/// axe-core, the accessibility checker the web board's browser test runs in each page:
/// npm's package, pinned by version and SHA-256, its `axe.min.js` kept at
/// `target/axe-core/` (fetched once, by the venv's Python).
const AXE_URL: &str = "https://registry.npmjs.org/axe-core/-/axe-core-4.10.2.tgz";
const AXE_SHA256: &str = "9ea2d2d6917da998122bdacfd3b473e31ead53f4b87146c716a12edf89158100";
const AXE_FETCH: &str = "import hashlib, io, sys, tarfile, urllib.request
url, digest, out = sys.argv[1:4]
data = urllib.request.urlopen(url, timeout=120).read()
if hashlib.sha256(data).hexdigest() != digest:
    sys.exit('axe-core: the download is not the pinned package (SHA-256 differs)')
with tarfile.open(fileobj=io.BytesIO(data)) as package:
    script = package.extractfile('package/axe.min.js').read()
with open(out + '.part', 'wb') as f:
    f.write(script)
import os; os.replace(out + '.part', out)
";

fn axe_core(root: &Path) -> Result<(), String> {
    let dir = root.join("target").join("axe-core");
    let stamp = dir.join("source");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == AXE_URL) {
        return Ok(());
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let python = self::dir(root).join("bin").join("python");
    let out = dir.join("axe.min.js");
    crate::run(
        &python.to_string_lossy(),
        &["-c", AXE_FETCH, AXE_URL, AXE_SHA256, &out.to_string_lossy()],
    )?;
    std::fs::write(&stamp, AXE_URL).map_err(|e| format!("{}: {e}", stamp.display()))
}

/// The pinned Python packages in `target/venv`, unless the stamp says they are there.
fn python_packages(root: &Path) -> Result<(), String> {
    let venv = dir(root);
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
