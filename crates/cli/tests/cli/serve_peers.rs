//! `kanban serve` facing peers that misbehave: no request without its token, loopback
//! or not; a client that hangs up in the middle of a response ends that exchange, never
//! the server; no process of the server's user reads its secrets.

use std::io::{Read, Write};
use std::net::TcpStream;

use board_core::{BoardWrites, NewTask};

use crate::common::{self, store, Board};

/// A `GET` of `path` with the token `Board::serve` gives, sent whole; the stream is left
/// to the caller to read or drop.
fn request(addr: &str, path: &str) -> std::io::Result<TcpStream> {
    send(addr, "GET", path, Some(common::SERVE_TOKEN), "")
}

/// Sends one request (`token` as a bearer token, if any) and returns the connection.
fn send(addr: &str, method: &str, path: &str, token: Option<&str>, body: &str) -> std::io::Result<TcpStream> {
    let mut stream = TcpStream::connect(addr)?;
    let auth = token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes())?;
    Ok(stream)
}

/// The status code of one exchange.
fn status(addr: &str, method: &str, path: &str, token: Option<&str>, body: &str) -> u16 {
    let mut answer = String::new();
    send(addr, method, path, token, body)
        .and_then(|mut s| s.read_to_string(&mut answer))
        .expect("an answer");
    answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"))
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

/// Loopback is no boundary on a shared machine: `kanban serve` given no token makes one
/// in the home (owner-only, kept across restarts) and takes no request without it, and
/// says where it is, never what it is, when its output is not a terminal.
#[test]
fn serve_without_a_token_requires_the_homes_own() {
    use std::io::BufRead;
    use std::os::unix::fs::PermissionsExt;
    let board = Board::init();
    let id = board.create(&["a card"]);
    let start = || {
        let mut child = common::kanban_command()
            .arg("--home")
            .arg(board.home())
            .args(["serve", "--bind", "127.0.0.1:0"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn kanban serve");
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        let second = lines.next().unwrap().unwrap();
        let addr = first
            .strip_prefix("serving the board at http://")
            .and_then(|a| a.strip_suffix('/'))
            .unwrap_or_else(|| panic!("{first}"))
            .to_owned();
        (child, addr, second)
    };
    let (mut serve, addr, said) = start();
    let file = board.home().join("serve-token");
    let token = std::fs::read_to_string(&file)
        .expect("the home's token")
        .trim()
        .to_owned();
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(
        token.len() == 32 && token.chars().all(|c| c.is_ascii_hexdigit()),
        "{token}"
    );
    assert!(said.contains(&file.display().to_string()), "{said}");
    assert!(!said.contains(&token), "the token was printed to a pipe: {said}");

    let comment = format!("/api/tasks/{id}/comment");
    let body = r#"{"body": "as anyone"}"#;
    let before = board.json(&["show", &id]);
    assert_eq!(status(&addr, "POST", &comment, None, body), 401);
    assert_eq!(
        status(&addr, "POST", &comment, Some("wrong-token-5b1e0c9d7a3f"), body),
        401
    );
    assert_eq!(status(&addr, "GET", "/api/tasks", None, ""), 401);
    assert_eq!(
        board.json(&["show", &id]),
        before,
        "a refused write changed the board"
    );
    assert_eq!(status(&addr, "GET", "/api/tasks", Some(&token), ""), 200);
    assert!((200..300).contains(&status(&addr, "POST", &comment, Some(&token), body)));
    let _ = serve.kill();
    let _ = serve.wait();

    // Restarted, the same token: a signed-in browser stays signed in.
    let (mut again, addr, _) = start();
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), token);
    assert_eq!(status(&addr, "GET", "/api/tasks", Some(&token), ""), 200);
    let _ = again.kill();
    let _ = again.wait();

    // A token others can read is no secret: refused, saying how to fix it.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = common::kanban_command()
        .arg("--home")
        .arg(board.home())
        .args(["serve", "--bind", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("readable by group or others") && stderr.contains("chmod 600"),
        "{stderr}"
    );
}
