//! A chain of network namespaces for route and MTU tests, as root: host h1, routers r1 and r2, host h2,
//! joined by veth links whose MTUs the test chooses. Link k (1..=3) is 198.18.(100+k).0/24, .1 on its
//! left end and .2 on its right; the routers forward and answer ICMP without rate limits. Everything
//! (namespaces, processes started in them) goes when the guard drops, also when the test fails.

use super::{bin, ip, Outcome};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

static NEXT: AtomicU32 = AtomicU32::new(0);

pub struct Chain {
    /// Namespace names: h1, r1, r2, h2.
    pub ns: [String; 4],
    children: Vec<Child>,
}

impl Chain {
    /// The address of node `i` (0 = h1 ... 3 = h2) on link `k` (1..=3).
    pub fn addr(link: u32, right: bool) -> String {
        format!("198.18.{}.{}", 100 + link, if right { 2 } else { 1 })
    }

    pub fn up(mtus: [u32; 3]) -> Chain {
        let tag = format!(
            "lsc{}{}",
            std::process::id() % 100_000,
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let ns = ["h1", "r1", "r2", "h2"].map(|n| format!("{tag}-{n}"));
        let c = Chain { ns, children: vec![] };
        for n in &c.ns {
            ip(&["netns", "add", n]);
            ip(&["-n", n, "link", "set", "lo", "up"]);
        }
        for k in 1..=3usize {
            let (l, r) = (&c.ns[k - 1], &c.ns[k]);
            let mtu = mtus[k - 1].to_string();
            ip(&[
                "link", "add", "right", "netns", l, "mtu", &mtu, "type", "veth", "peer", "name", "left",
                "netns", r, "mtu", &mtu,
            ]);
            ip(&[
                "-n",
                l,
                "addr",
                "add",
                &format!("{}/24", Chain::addr(k as u32, false)),
                "dev",
                "right",
            ]);
            ip(&[
                "-n",
                r,
                "addr",
                "add",
                &format!("{}/24", Chain::addr(k as u32, true)),
                "dev",
                "left",
            ]);
            ip(&["-n", l, "link", "set", "right", "up"]);
            ip(&["-n", r, "link", "set", "left", "up"]);
        }
        ip(&[
            "-n",
            &c.ns[0],
            "route",
            "add",
            "default",
            "via",
            &Chain::addr(1, true),
        ]);
        ip(&[
            "-n",
            &c.ns[3],
            "route",
            "add",
            "default",
            "via",
            &Chain::addr(3, false),
        ]);
        ip(&[
            "-n",
            &c.ns[1],
            "route",
            "add",
            "198.18.103.0/24",
            "via",
            &Chain::addr(2, true),
        ]);
        ip(&[
            "-n",
            &c.ns[2],
            "route",
            "add",
            "198.18.101.0/24",
            "via",
            &Chain::addr(2, false),
        ]);
        for n in &c.ns {
            for kv in ["net.ipv4.ip_forward=1", "net.ipv4.icmp_ratelimit=0"] {
                let o = Command::new("ip")
                    .args(["netns", "exec", n, "sysctl", "-qw", kv])
                    .output()
                    .expect("sysctl");
                assert!(
                    o.status.success(),
                    "{kv} in {n}: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
            }
        }
        c
    }

    /// `landspeed serve` in node `i`, waited for until it listens.
    pub fn serve(&mut self, i: usize) {
        use std::io::{BufRead, BufReader};
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.ns[i], bin(), "serve"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn server");
        let out = child.stdout.take().unwrap();
        self.children.push(child);
        let mut line = String::new();
        BufReader::new(out).read_line(&mut line).unwrap();
        assert!(line.contains("listening"), "server said {line:?}");
    }

    /// `landspeed ARGS` in node `i`.
    pub fn landspeed(&self, i: usize, args: &[&str], timeout: Duration) -> Outcome {
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns[i], bin()])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn landspeed");
        let out = super::wait_output(child, timeout).unwrap_or_else(|| panic!("{args:?} hung"));
        Outcome {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Drop for Chain {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for n in &self.ns {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
    }
}
