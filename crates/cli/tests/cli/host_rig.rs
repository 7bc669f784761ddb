//! The host rig: separate "hosts" on one machine. Each host is its own network, PID and
//! mount namespace (util-linux `unshare`, with `tini` as its init, so pids inside restart
//! at 1 and orphans are reaped), joined to the machine by a veth pair with an address of
//! its own. What a host runs is started inside with `nsenter`. A host reaches the
//! machine's loopback servers (PostgreSQL, the fake model) through forwarders the rig
//! listens with on the machine's end of its link, so a host cut off from its link is cut
//! off from the board.
//!
//! Cleanup does not depend on the test ending well: a host's init lives only while the
//! rig holds the write end of its stdin, so when the rig is dropped or its process dies
//! (a failed assertion, a SIGKILL), the init exits, the kernel kills every process of the
//! namespace, and the namespace and both ends of its veth pair go with them.
//!
//! Faults: [`Host::kill`] kills every process of the host at once, as a machine that
//! loses power; [`Host::partition`] and [`Host::heal`] take its link down and up;
//! [`Host::pause`] and [`Host::resume`] stop and continue every process of it.
//!
//! Runs as root (CI does); without root, or without `unshare`, `nsenter`, `tini` or
//! `ip`, it fails with one line saying what is missing. The suites on it are
//! `several_gateways::apart` (`cargo xtask hosts`).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream, ToSocketAddrs};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The programs the rig runs, each from Debian (`util-linux`, `tini`, `iproute2`).
const TOOLS: [&str; 4] = ["unshare", "nsenter", "tini", "ip"];

/// How long the rig waits for a host to come up or go away.
const SETTLE: Duration = Duration::from_secs(10);

/// Fails, with what is missing, unless this process can make hosts.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert!(
        euid == 0,
        "the host rig needs root (network and PID namespaces); run the suite as root, as CI does"
    );
    for tool in TOOLS {
        let found = std::env::var_os("PATH")
            .into_iter()
            .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .any(|dir| dir.join(tool).is_file());
        assert!(
            found,
            "the host rig needs `{tool}` on PATH (Debian: util-linux, tini, iproute2)"
        );
    }
}

/// One host: its init, its link, and what it reaches the machine through.
pub struct Host {
    pub name: String,
    /// `unshare`, the parent of the host's init; its stdin is the init's lifeline.
    holder: Child,
    lifeline: Option<ChildStdin>,
    /// The host's init (`tini`), as the machine numbers it.
    init: u32,
    /// The machine's end of the link, and its address: where the host reaches the machine.
    link: String,
    pub outside: Ipv4Addr,
    forwards: Vec<Forward>,
}

impl Host {
    /// Starts host `name` with a fresh namespace and link.
    pub fn start(name: &str) -> Host {
        require_root();
        let mut holder = Command::new("unshare")
            .args([
                "--net",
                "--pid",
                "--mount",
                "--fork",
                "--mount-proc",
                "--kill-child",
            ])
            .args(["tini", "-s", "--", "cat"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start unshare");
        let lifeline = holder.stdin.take();
        let init = wait_for_value("the host's init", || child_of(holder.id()));
        let (link, outside) = add_link(init);
        let host = Host {
            name: name.to_owned(),
            holder,
            lifeline,
            init,
            link,
            outside,
            forwards: Vec::new(),
        };
        let inside = Ipv4Addr::from(u32::from(outside) + 1);
        host.inside(&["ip", "addr", "add", &format!("{inside}/30"), "dev", "eth0"]);
        host.inside(&["ip", "link", "set", "eth0", "up"]);
        host.inside(&["ip", "link", "set", "lo", "up"]);
        host
    }

    /// A command that runs `program` inside the host: its network, pids and /proc.
    pub fn command(&self, program: &str) -> Command {
        let mut command = Command::new("nsenter");
        command
            .arg("--target")
            .arg(self.init.to_string())
            .args(["--net", "--pid", "--mount", "--"])
            .arg(program);
        command
    }

    /// Runs `argv` inside the host and fails unless it succeeds.
    fn inside(&self, argv: &[&str]) {
        let out = self.command(argv[0]).args(&argv[1..]).output().expect("nsenter");
        assert!(out.status.success(), "{argv:?} in {}: {out:?}", self.name);
    }

    /// Lets the host reach `target` on the machine at `outside:port`; returns that
    /// address as the host sees it.
    pub fn forward(&mut self, target: SocketAddr) -> SocketAddr {
        let forward = Forward::start(SocketAddrV4::new(self.outside, target.port()), target);
        let at = forward.at;
        self.forwards.push(forward);
        at
    }

    /// Kills every process of the host at once (SIGKILL to its init: the kernel takes the
    /// rest), as a machine that loses power; waits until the host is gone. As after a
    /// power cut, its connections to the machine's servers are left open, unanswered.
    pub fn kill(&mut self) {
        signal(self.init, libc::SIGKILL);
        let _ = self.holder.wait();
        self.lifeline = None;
    }

    /// Cuts the host off: its link goes down, and what it sends is lost.
    pub fn partition(&self) {
        ip(&["link", "set", &self.link, "down"]);
    }

    /// Brings the host's link back.
    pub fn heal(&self) {
        ip(&["link", "set", &self.link, "up"]);
    }

    /// Every process of the host, as the machine numbers them, its init first.
    pub fn processes(&self) -> Vec<u32> {
        let mut pids = vec![self.init];
        let (Some(ns), Ok(dir)) = (pid_namespace(self.init), std::fs::read_dir("/proc")) else {
            return pids;
        };
        for entry in dir.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if pid != self.init && pid_namespace(pid).as_deref() == Some(ns.as_str()) {
                pids.push(pid);
            }
        }
        pids
    }

    /// Stops every process of the host (SIGSTOP), as a machine that hangs.
    pub fn pause(&self) {
        for pid in self.processes() {
            signal(pid, libc::SIGSTOP);
        }
    }

    /// Lets every process of the host go on (SIGCONT), and the parents they have on the
    /// machine (`nsenter`, which stops itself when its child stops, as a shell's job would).
    pub fn resume(&self) {
        for pid in self.processes().into_iter().rev() {
            signal(pid, libc::SIGCONT);
            if let Some(parent) = parent_of(pid) {
                signal(parent, libc::SIGCONT);
            }
        }
    }
}

/// The parent of `pid`, while it runs.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The PID namespace of `pid` (`pid:[inode]`), while it runs.
fn pid_namespace(pid: u32) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/ns/pid"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

impl Drop for Host {
    fn drop(&mut self) {
        self.lifeline = None;
        signal(self.init, libc::SIGKILL);
        let _ = self.holder.wait();
        for forward in &self.forwards {
            forward.close_all();
        }
        self.forwards.clear();
        // The namespace went with its last process; a link left by a kernel slower than
        // us goes now.
        let _ = Command::new("ip")
            .args(["link", "del", &self.link])
            .stderr(Stdio::null())
            .status();
    }
}

/// The server's address in a `postgres://user@host:port/db` URL.
pub fn server_address(url: &str) -> SocketAddr {
    let rest = url.split_once("://").expect("a URL").1;
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host_port = if host_port.contains(':') {
        host_port.to_owned()
    } else {
        format!("{host_port}:5432")
    };
    host_port
        .to_socket_addrs()
        .expect("the test server's address")
        .find(SocketAddr::is_ipv4)
        .expect("an IPv4 address for the test server")
}

/// Adds a veth pair: one end `eth0` inside the namespace of `init`, the other on the
/// machine with a free /30 of 10.64.0.0/10, whose first address it takes. A link name is
/// claimed by creating it, so concurrent rigs never share a subnet.
fn add_link(init: u32) -> (String, Ipv4Addr) {
    let mut random = [0u8; 2];
    getrandom::fill(&mut random).unwrap();
    let start = u16::from_le_bytes(random) as u32;
    for probe in 0..4096u32 {
        let block = (start + probe) % (1 << 20);
        let link = format!("kbh{block:06x}");
        let made = Command::new("ip")
            .args([
                "link", "add", &link, "type", "veth", "peer", "name", "eth0", "netns",
            ])
            .arg(init.to_string())
            .stderr(Stdio::null())
            .status()
            .expect("ip");
        if !made.success() {
            continue;
        }
        let outside = Ipv4Addr::from((10 << 24) | (64 << 16) | (block << 2) | 1);
        ip(&["addr", "add", &format!("{outside}/30"), "dev", &link]);
        ip(&["link", "set", &link, "up"]);
        return (link, outside);
    }
    panic!("no free link name for a host");
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip");
    assert!(out.status.success(), "ip {args:?}: {out:?}");
}

fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: signalling a process of a host this rig made.
    unsafe { libc::kill(pid as libc::pid_t, signal) };
}

/// The one child of `parent`, once it has one.
fn child_of(parent: u32) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

fn wait_for_value<T>(what: &str, mut get: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = get() {
            return value;
        }
        assert!(start.elapsed() < SETTLE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A TCP forwarder on the machine: what connects to `at` is joined to `target`.
struct Forward {
    at: SocketAddr,
    stop: Arc<AtomicBool>,
    /// Both ends of every connection it joined.
    joined: Arc<Mutex<Vec<TcpStream>>>,
}

impl Forward {
    fn start(at: SocketAddrV4, target: SocketAddr) -> Forward {
        let listener = TcpListener::bind(at).unwrap_or_else(|e| panic!("listen on {at}: {e}"));
        let at = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let joined = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&joined);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(inbound) = conn else { continue };
                let Ok(outbound) = TcpStream::connect(target) else {
                    continue;
                };
                if let (Ok(a), Ok(b)) = (inbound.try_clone(), outbound.try_clone()) {
                    kept.lock().unwrap_or_else(|e| e.into_inner()).extend([a, b]);
                }
                splice(inbound, outbound);
            }
        });
        Forward { at, stop, joined }
    }

    /// Ends every connection it joined, both ways.
    fn close_all(&self) {
        for stream in self.joined.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Forward {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag; it may fail once the link is gone.
        let _ = TcpStream::connect_timeout(&self.at, Duration::from_millis(200));
    }
}

/// Copies both ways between two connections until either side closes.
fn splice(a: TcpStream, b: TcpStream) {
    for (mut from, mut to) in [(a.try_clone().unwrap(), b.try_clone().unwrap()), (b, a)] {
        std::thread::spawn(move || {
            let mut buf = [0u8; 16 * 1024];
            loop {
                match from.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                }
            }
            let _ = to.shutdown(Shutdown::Write);
        });
    }
}
