//! `kanban serve` facing peers that misbehave: a client that hangs up in the middle of a
//! response ends that exchange, never the server.

use std::io::{Read, Write};
use std::net::TcpStream;

use board_core::{NewTask, Store};

use crate::common::{store, Board};

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
