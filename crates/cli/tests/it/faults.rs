//! A server left on the internet meets clients that die at every step, connections that say nothing or
//! trickle, data streams aimed at other people's tests, and a crowd of mixed-protocol clients. Each test
//! checks the server afterwards: still serving, and its descriptors and threads back where they started.
//! The figures (counts, memory) are printed for the issue notes.

use crate::common;

use common::{bin, landspeed, ServerProc};
use landspeed_core::config::{Direction, EndCondition, TestSpec};
use landspeed_proto::{FrameDecoder, Message, Preamble, SessionId};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Descriptors, threads and resident memory (KiB) of a process.
pub(crate) fn usage(pid: u32) -> (usize, usize, u64) {
    let count = |d: &str| std::fs::read_dir(format!("/proc/{pid}/{d}")).map_or(0, |r| r.count());
    let rss = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0);
    (count("fd"), count("task"), rss)
}

/// Waits (bounded) until the server's descriptors and threads are back at `base`; returns what it saw.
/// Between looks it waits on the server's log (a test ending prints a line), at most 50 ms.
fn settle(s: &ServerProc, base: (usize, usize, u64), within: Duration) -> (usize, usize, u64) {
    let pid = s.process().id();
    let end = Instant::now() + within;
    loop {
        let now = usage(pid);
        if (now.0, now.1) == (base.0, base.1) || Instant::now() > end {
            return now;
        }
        let _ = s.next_line(Duration::from_millis(50));
    }
}

/// The server's usage once it is idle: the same descriptor and thread counts for 300 ms running (a
/// finished test's thread may still be exiting when its client returns).
fn steady(s: &ServerProc) -> (usize, usize, u64) {
    let pid = s.process().id();
    let end = Instant::now() + Duration::from_secs(10);
    let mut last = usage(pid);
    let mut since = Instant::now();
    while Instant::now() < end {
        let _ = s.next_line(Duration::from_millis(20));
        let now = usage(pid);
        if (now.0, now.1) != (last.0, last.1) {
            since = Instant::now();
        } else if since.elapsed() >= Duration::from_millis(300) {
            return now;
        }
        last = now;
    }
    last
}

/// A deterministic generator, so a failing sequence can be replayed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

/// A raw landspeed control connection, driven step by step.
struct Ctl {
    s: TcpStream,
    d: FrameDecoder,
}

impl Ctl {
    fn read(&mut self) -> Option<Message> {
        let mut buf = [0u8; 4096];
        loop {
            if let Ok(Some(m)) = self.d.next_message() {
                return Some(m);
            }
            match self.s.read(&mut buf) {
                Ok(n) if n > 0 => self.d.push(&buf[..n]),
                _ => return None,
            }
        }
    }

    /// Greets; None when the server turned the connection away (busy, rate).
    fn hello(port: u16) -> Option<Ctl> {
        let mut s = connect(port);
        let b = common::control_greeting("fault test");
        s.write_all(&b).ok()?;
        let mut c = Ctl {
            s,
            d: FrameDecoder::new(),
        };
        matches!(c.read()?, Message::Welcome { .. }).then_some(c)
    }

    fn request(&mut self, spec: TestSpec) -> Option<SessionId> {
        let m = landspeed_proto::encode(&Message::TestRequest {
            spec: Box::new(spec),
            auth: None,
        });
        self.s.write_all(&m).ok()?;
        match self.read()? {
            Message::Accepted { session, .. } => Some(session),
            _ => None,
        }
    }

    fn send(&mut self, m: &Message) {
        let _ = self.s.write_all(&landspeed_proto::encode(m));
    }
}

fn data_stream(port: u16, session: SessionId, stream: u32) -> Option<TcpStream> {
    let mut s = connect(port);
    s.write_all(&Preamble::data(session, stream, None).encode())
        .ok()?;
    Some(s)
}

fn spec(rng: &mut Rng) -> TestSpec {
    TestSpec {
        streams: 1 + rng.below(2) as u32,
        direction: [Direction::Forward, Direction::Reverse, Direction::Bidir][rng.below(3) as usize],
        end: EndCondition::Time(Duration::from_secs(3)),
        ..TestSpec::default()
    }
}

/// One client that gives up at `step` of the protocol, dropping (closing) whatever it holds.
fn abort_at(port: u16, step: u64, rng: &mut Rng) {
    match step {
        // Connect, say nothing, leave.
        0 => drop(connect(port)),
        // Part of a preamble, or part of an iperf3 cookie.
        1 => {
            let mut s = connect(port);
            let _ = s.write_all(&b"LSPD\0"[..1 + rng.below(5) as usize]);
        }
        2 => {
            let mut s = connect(port);
            let _ = s.write_all(b"abcdefghijklmnop");
        }
        // After the welcome; after the request was accepted.
        3 => drop(Ctl::hello(port)),
        4 => {
            if let Some(mut c) = Ctl::hello(port) {
                c.request(spec(rng));
            }
        }
        // Some data streams connected, not all; or all connected and never started.
        5 | 6 => {
            let Some(mut c) = Ctl::hello(port) else { return };
            let sp = spec(rng);
            let Some(sid) = c.request(sp.clone()) else { return };
            let n = if step == 5 {
                sp.total_streams() - 1
            } else {
                sp.total_streams()
            };
            let streams: Vec<_> = (0..n).filter_map(|i| data_stream(port, sid, i)).collect();
            if step == 6 {
                let _ = c.read(); // Ready
            }
            drop(streams);
        }
        // Mid-test: started, some bytes moved, then everything cut (or the control connection first,
        // leaving half-open data streams for a moment).
        7 | 8 => {
            let Some(mut c) = Ctl::hello(port) else { return };
            let sp = spec(rng);
            let Some(sid) = c.request(sp.clone()) else { return };
            let mut streams: Vec<_> = (0..sp.total_streams())
                .filter_map(|i| data_stream(port, sid, i))
                .collect();
            if !matches!(c.read(), Some(Message::Ready)) {
                return;
            }
            c.send(&Message::Start);
            for s in &mut streams {
                let _ = s.write_all(&[0x5a; 4096]);
            }
            if step == 8 {
                drop(c);
                let _ = streams.first_mut().map(|s| s.write_all(&[1; 1024]));
            }
        }
        // Data streams quoting a session that is not this client's.
        9 => {
            let mut id = [0u8; 16];
            for (i, b) in id.iter_mut().enumerate() {
                *b = (rng.next() >> (i % 8)) as u8;
            }
            drop(data_stream(port, SessionId(id), rng.below(4) as u32));
        }
        // A protocol violation: start before anything was asked.
        _ => {
            if let Some(mut c) = Ctl::hello(port) {
                c.send(&Message::Start);
                let _ = c.read();
            }
        }
    }
}

fn spawn_quiet(args: &[&str]) -> Child {
    Command::new(args[0])
        .args(&args[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn client")
}

fn iperf3_present() -> bool {
    let ok = Command::new("iperf3").arg("--version").output().is_ok();
    assert!(ok || std::env::var_os("CI").is_none(), "iperf3 missing in CI");
    ok
}

/// A server with short timeouts, warmed up by one complete test; its pid, port and baseline usage.
fn warm_server(handshake: &str, idle: &str) -> (ServerProc, u32, String, (usize, usize, u64)) {
    // Every client here is on 127.0.0.1: one address may hold every slot.
    let s = ServerProc::start(
        "127.0.0.1",
        &[
            "--handshake-timeout",
            handshake,
            "--idle-timeout",
            idle,
            "--max-tests-per-address",
            "32",
        ],
    );
    let pid = s.process().id();
    let p = s.port.to_string();
    let o = landspeed(
        &["run", "127.0.0.1", "-p", &p, "-n", "1M"],
        Duration::from_secs(30),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let base = steady(&s);
    (s, pid, p, base)
}

#[test]
fn a_thousand_aborted_tests_leak_nothing() {
    let (s, _pid, p, base) = warm_server("2s", "3s");
    let mut rng = Rng(0x1a2b_3c4d_5e6f_7081);
    let mut legit = vec![];
    let mut killed = 0;
    for i in 0..1000 {
        if i % 200 == 100 {
            // Real tests run among the wreckage and must complete.
            legit.push(spawn_quiet(&[
                bin(),
                "run",
                "127.0.0.1",
                "-p",
                &p,
                "-n",
                "30M",
                "-P",
                "2",
            ]));
        }
        if i % 50 == 25 {
            // A real client process killed at a random moment.
            let c = spawn_quiet(&[bin(), "run", "127.0.0.1", "-p", &p, "-t", "2", "-P", "2"]);
            killed += u32::from(common::wait_exit(c, Duration::from_millis(rng.below(400))).is_none());
        }
        if i % 100 == 75 && iperf3_present() {
            let c = spawn_quiet(&["iperf3", "-c", "127.0.0.1", "-p", &p, "-t", "2"]);
            killed += u32::from(common::wait_exit(c, Duration::from_millis(rng.below(400))).is_none());
        }
        let step = rng.below(11);
        abort_at(s.port, step, &mut rng);
    }
    for c in legit {
        let out = common::wait_output(c, Duration::from_secs(60)).expect("a real test hung");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let after = settle(&s, base, Duration::from_secs(20));
    eprintln!(
        "aborted tests: 1000 raw + {killed} killed processes; server fds {} -> {}, threads {} -> {}, RSS {} -> {} KiB",
        base.0, after.0, base.1, after.1, base.2, after.2
    );
    assert_eq!(
        (after.0, after.1),
        (base.0, base.1),
        "descriptors or threads leaked"
    );
    let o = landspeed(
        &["run", "127.0.0.1", "-p", &p, "-n", "5M"],
        Duration::from_secs(30),
    );
    assert_eq!(o.code, 0, "the server no longer serves: {}", o.stderr);
}

/// A connection to the server from 127.0.0.`last`.
fn connect_from(last: u8, port: u16) -> TcpStream {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let src: SocketAddr = format!("127.0.0.{last}:0").parse().unwrap();
    sock.bind(&src.into()).unwrap();
    let dst: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    sock.connect(&dst.into()).unwrap();
    sock.into()
}

#[test]
fn silent_and_trickling_connections_cost_no_threads() {
    let s = ServerProc::start("127.0.0.1", &["--handshake-timeout", "2s"]);
    let pid = s.process().id();
    let base = steady(&s);
    // 250 connections from five addresses, within the per-address cap, plus 100 more from one
    // address, over it: those are closed at once.
    let mut held = vec![];
    for k in 0..5u8 {
        for j in 0..50 {
            let mut t = connect_from(k + 2, s.port);
            // Some say nothing, some send a byte of a greeting and stall.
            if j % 2 == 1 {
                let _ = t.write_all(if j % 4 == 1 { b"L" } else { b"a" });
            }
            held.push(t);
        }
    }
    let crowd: Vec<TcpStream> = (0..100).map(|_| connect_from(2, s.port)).collect();
    // A real test still runs while they hang on.
    let p = s.port.to_string();
    let o = landspeed(
        &["run", "127.0.0.1", "-p", &p, "-n", "5M"],
        Duration::from_secs(30),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let during = usage(pid);
    assert!(
        during.1 <= base.1 + 1,
        "threads grew from {} to {} with 350 idle connections",
        base.1,
        during.1
    );
    // The server closes every one of them by the handshake timeout: each read ends.
    for mut t in held.into_iter().chain(crowd) {
        t.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut b = [0u8; 16];
        let r = t.read(&mut b);
        assert!(matches!(r, Ok(0) | Err(_)), "connection still open: {r:?}");
    }
    let after = settle(&s, base, Duration::from_secs(10));
    assert_eq!((after.0, after.1), (base.0, base.1));
}

/// What one soak client did.
#[derive(Default, Debug)]
struct Tally {
    ok: u32,
    failed_cleanly: u32,
    killed: u32,
}

/// The suite soaks for 30 s (about 400 client runs, one in eight killed, enough to leak if anything
/// leaks); `LANDSPEED_SOAK_S=60` or more for the longer soak docs/security.md reports.
#[test]
fn sixteen_clients_mixing_protocols_under_a_soak() {
    let secs: u64 = std::env::var("LANDSPEED_SOAK_S")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let iperf3 = iperf3_present();
    let (s, pid, p, base) = warm_server("3s", "5s");
    let end = Instant::now() + Duration::from_secs(secs);
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let workers: Vec<_> = (0..16u64)
        .map(|w| {
            let p = p.clone();
            std::thread::spawn(move || {
                let mut rng = Rng(0x9e37_79b9 ^ ((w + 1) * 0x1000_0001));
                let mut t = Tally::default();
                let mut k = 0;
                while Instant::now() < end {
                    k += 1;
                    let ls = |extra: &[&str]| {
                        let mut v = vec![bin(), "run", "127.0.0.1", "-p", &p, "-t", "1"];
                        v.extend_from_slice(extra);
                        v.iter().map(|s| s.to_string()).collect::<Vec<_>>()
                    };
                    let ip = |extra: &[&str]| {
                        let mut v = vec!["iperf3", "-c", "127.0.0.1", "-p", &p, "-t", "1"];
                        v.extend_from_slice(extra);
                        v.iter().map(|s| s.to_string()).collect::<Vec<_>>()
                    };
                    let args = match (w + k) % 7 {
                        0 => ls(&["-P", "2"]),
                        1 => ls(&["-R"]),
                        2 => ls(&["-u", "-b", "100M"]),
                        3 => ls(&["--bidir"]),
                        4 if iperf3 => ip(&[]),
                        5 if iperf3 => ip(&["-R"]),
                        6 if iperf3 => ip(&["-u", "-b", "50M"]),
                        _ => ls(&[]),
                    };
                    let a: Vec<&str> = args.iter().map(String::as_str).collect();
                    let c = spawn_quiet(&a);
                    if rng.below(8) == 0 {
                        // Killed at a random moment, unless it ends first.
                        let limit = Duration::from_millis(rng.below(1000));
                        t.killed += u32::from(common::wait_exit(c, limit).is_none());
                        continue;
                    }
                    let out = common::wait_output(c, Duration::from_secs(40))
                        .unwrap_or_else(|| panic!("client {a:?} hung"));
                    match out.status.code() {
                        Some(0) => t.ok += 1,
                        // A clean failure says why (e.g. busy while 16 tests compete).
                        Some(1) if !out.stderr.is_empty() => t.failed_cleanly += 1,
                        other => panic!(
                            "client {a:?} ended badly ({other:?}): {}",
                            String::from_utf8_lossy(&out.stderr)
                        ),
                    }
                }
                t
            })
        })
        .collect();
    // Memory sampled every 200 ms (or as the server logs a test) until every worker is done.
    while workers.iter().any(|w| !w.is_finished()) {
        peak.fetch_max(usage(pid).2, std::sync::atomic::Ordering::Relaxed);
        let _ = s.next_line(Duration::from_millis(200));
    }
    let mut total = Tally::default();
    for w in workers {
        let t = w.join().expect("soak worker panicked");
        total.ok += t.ok;
        total.failed_cleanly += t.failed_cleanly;
        total.killed += t.killed;
    }
    let after = settle(&s, base, Duration::from_secs(20));
    let peak = peak.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!(
        "soak {secs} s, 16 clients: {total:?}; server fds {} -> {}, threads {} -> {}, RSS {} KiB at start, \
         peak {peak} KiB, {} KiB at end",
        base.0, after.0, base.1, after.1, base.2, after.2
    );
    assert!(total.ok > 16, "too few tests completed: {total:?}");
    assert_eq!(
        (after.0, after.1),
        (base.0, base.1),
        "descriptors or threads leaked"
    );
    assert!(peak < 512 * 1024, "server memory peaked at {peak} KiB");
    assert!(
        after.2 < base.2 + 128 * 1024,
        "server memory grew from {} to {} KiB",
        base.2,
        after.2
    );
}
