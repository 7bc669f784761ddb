//! A write's round trips to the server, counted by a proxy between the store and the
//! server: the store sends a transaction's `BEGIN` with its first statement and its
//! events and `COMMIT` with its last, so a claim and a completion take three each.
//!
//! The proxy counts the reads it makes of the store's side. A client that waited for
//! each answer before sending the next statement could not have its writes read
//! together, so a count at or under the expected one is proof; a slow proxy can only
//! merge writes, never split a pipelined one into more.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use board_core::{BoardWrites, Completion, NewTask};
use board_postgres::{Options, PgStore};
use common::TestSchema;
use postgres::config::Host;

/// One side of a proxied connection.
enum Side {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Side {
    fn split(&self) -> (Box<dyn Read + Send>, Box<dyn Write + Send>) {
        match self {
            Side::Tcp(s) => (Box::new(s.try_clone().unwrap()), Box::new(s.try_clone().unwrap())),
            Side::Unix(s) => (Box::new(s.try_clone().unwrap()), Box::new(s.try_clone().unwrap())),
        }
    }

    fn close(&self) {
        let _ = match self {
            Side::Tcp(s) => s.shutdown(Shutdown::Both),
            Side::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }
}

/// Copies `from` into `to` until either ends, counting the reads.
fn pump(mut from: Box<dyn Read + Send>, mut to: Box<dyn Write + Send>, reads: Option<Arc<AtomicUsize>>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if let Some(reads) = &reads {
            reads.fetch_add(1, Ordering::SeqCst);
        }
        if to.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}

/// A proxy on a loopback port to the test server, for every connection made to it;
/// the key=value connection string for it, and the count of the client's writes.
fn proxy() -> (String, Arc<AtomicUsize>) {
    let config: postgres::Config = common::url().parse().expect("the test URL parses");
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let upstream = match config.get_hosts().first() {
        Some(Host::Unix(dir)) => Err(dir.join(format!(".s.PGSQL.{port}"))),
        Some(Host::Tcp(host)) => Ok(format!("{host}:{port}")),
        None => Ok(format!("127.0.0.1:{port}")),
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let local = listener.local_addr().unwrap().port();
    let reads = Arc::new(AtomicUsize::new(0));
    let counted = reads.clone();
    thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let server = match &upstream {
                Ok(addr) => Side::Tcp(TcpStream::connect(addr).unwrap()),
                Err(path) => Side::Unix(UnixStream::connect(path).unwrap()),
            };
            client.set_nodelay(true).unwrap();
            let client = Side::Tcp(client);
            let (from_client, to_client) = client.split();
            let (from_server, to_server) = server.split();
            let counted = counted.clone();
            thread::spawn(move || {
                pump(from_client, to_server, Some(counted));
                server.close();
            });
            thread::spawn(move || {
                pump(from_server, to_client, None);
                client.close();
            });
        }
    });
    let mut url = format!("host=127.0.0.1 port={local}");
    if let Some(user) = config.get_user() {
        url.push_str(&format!(" user='{user}'"));
    }
    if let Some(db) = config.get_dbname() {
        url.push_str(&format!(" dbname='{db}'"));
    }
    if let Some(password) = config.get_password() {
        url.push_str(&format!(" password='{}'", String::from_utf8_lossy(password)));
    }
    (url, reads)
}

#[test]
fn a_claim_and_a_completion_take_three_round_trips_each() {
    let schema = TestSchema::new();
    let (url, reads) = proxy();
    let options = Options {
        max_connections: 1,
        ..schema.options()
    };
    let store = PgStore::open(&url, &options).unwrap();
    let warm = store.create(&NewTask::titled("warm"), 1).unwrap();
    let task = store.create(&NewTask::titled("counted"), 1).unwrap();
    // The first claim and completion prepare their statements on the connection.
    let guarded = |run| Completion {
        expected_run_id: Some(run),
        ..Completion::default()
    };
    let run = store.claim(&warm.id, 900, 2).unwrap().run_id;
    assert!(store.complete(&warm.id, &guarded(run), 3).unwrap());

    let before = reads.load(Ordering::SeqCst);
    let run = store.claim(&task.id, 900, 4).unwrap().run_id;
    let claimed = reads.load(Ordering::SeqCst);
    assert!(store.complete(&task.id, &guarded(run), 5).unwrap());
    let completed = reads.load(Ordering::SeqCst);
    assert_eq!(claimed - before, 3, "round trips of a claim");
    assert_eq!(completed - claimed, 3, "round trips of a completion");
}
