//! `kanban serve` facing peers that misbehave: a client that hangs up in the middle of a
//! response ends that exchange, never the server; no process of the server's user reads
//! its secrets.

use std::io::{Read, Write};
use std::net::TcpStream;

use board_core::{NewTask, Store};

use crate::common::{self, store, Board};

/// A `GET` of `path`, sent whole; the stream is left to the caller to read or drop.
fn request(addr: &str, path: &str) -> std::io::Result<TcpStream> {
    let mut stream = TcpStream::connect(addr)?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes())?;
    Ok(stream)
}

/// Starts a download of `path` and hangs up after its first bytes.
fn hang_up_during(addr: &str, path: &str) -> std::io::Result<()> {
    let mut stream = request(addr, path)?;
    let mut first = [0u8; 1024];
    stream.read_exact(&mut first)?;
    // The client's FIN puts the server's end in CLOSE_WAIT, and closing with data
    // unread then resets it: the server's next write fails with EPIPE, and a `writev`
    // (no MSG_NOSIGNAL) raises SIGPIPE, which kills a process that does not ignore it.
    stream.shutdown(std::net::Shutdown::Write)?;
    drop(stream);
    Ok(())
}

#[test]
fn a_client_that_hangs_up_mid_response_does_not_stop_the_server() {
    let board = Board::init();
    let s = store(&board);
    let now = board_home::now();
    // About 16 MiB of task bodies: more than loopback's socket buffers hold, so the
    // server is still writing when the client goes.
    let body = "b".repeat(64 * 1024);
    for i in 0..256 {
        let task = NewTask {
            body: body.clone(),
            ..NewTask::titled(format!("large card {i}"))
        };
        s.create(&task, now).expect("create");
    }
    let (mut serve, addr) = board.serve(&[]);
    let hung_up = (0..4).try_for_each(|_| hang_up_during(&addr, "/api/tasks"));
    // A whole response read to its end: by then the server has written to every reset
    // connection.
    let mut whole = Vec::new();
    let read = request(&addr, "/api/tasks").and_then(|mut r| r.read_to_end(&mut whole));
    let status = serve.try_wait().expect("poll kanban serve");
    let _ = serve.kill();
    let _ = serve.wait();
    assert_eq!(status, None, "kanban serve died when a client hung up");
    hung_up.expect("four downloads started");
    read.expect("a whole response");
    let served = String::from_utf8_lossy(&whole[..whole.len().min(64)]).into_owned();
    assert!(served.starts_with("HTTP/1.1 200"), "{served}");
    assert!(whole.len() > 16 * 1024 * 1024, "{} bytes served", whole.len());
}

/// The server holds its token and the model key: no other process of its user can read
/// its environment (it is undumpable), and a token on the command line, which every user
/// sees in `ps`, is warned about.
#[test]
fn no_process_of_its_user_reads_the_servers_secrets() {
    const TOKEN: &str = "serve-token-7f3a91c4e2d05b68";
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    // Root reads any process's memory: the server runs as nobody when the tests are root.
    let as_user = || common::unprivileged(dir.path());
    let init = as_user().arg("--home").arg(&home).arg("init").output().unwrap();
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    let mut cmd = as_user();
    cmd.arg("--home")
        .arg(&home)
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("KANBAN_SERVE_TOKEN", TOKEN)
        .stderr(std::process::Stdio::null());
    let (mut serve, _) = common::serving(cmd);
    let pid = serve.id();
    let environ = format!("/proc/{pid}/environ");
    let read = as_user_read(&environ);
    let _ = serve.kill();
    let _ = serve.wait();
    assert!(
        read.is_err(),
        "a process of the server's user read its environment"
    );

    let mut cmd = as_user();
    cmd.arg("--home")
        .arg(&home)
        .args(["serve", "--bind", "127.0.0.1:0", "--token", TOKEN])
        .stderr(std::process::Stdio::piped());
    let (mut serve, _) = common::serving(cmd);
    let _ = serve.kill();
    let out = serve.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--token shows in `ps`"), "{stderr}");
    assert!(!stderr.contains(TOKEN), "{stderr}");
}

/// Reads `path` as the user `common::unprivileged` runs the binary as: this process when
/// it is not root, else nobody (through `setpriv`).
fn as_user_read(path: &str) -> Result<Vec<u8>, String> {
    if !common::is_root() {
        return std::fs::read(path).map_err(|e| e.to_string());
    }
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "cat", path])
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}
