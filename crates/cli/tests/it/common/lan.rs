//! Hosts on one LAN for multi-host tests, as root: network namespaces h0..hN-1, each with one veth into
//! a bridge that lives in its own "switch" namespace, addressed 198.18.50.(i+1)/24. `landspeed serve`
//! can be started in any of them (and killed, to fail a host on purpose); everything goes when the guard
//! drops, also when the test fails.

use super::{bin, ip, Outcome};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

static NEXT: AtomicU32 = AtomicU32::new(0);

pub struct Lan {
    pub ns: Vec<String>,
    switch: String,
    servers: Vec<Option<Child>>,
    pub dir: std::path::PathBuf,
}

impl Lan {
    /// Host `i`'s address.
    pub fn addr(i: usize) -> String {
        format!("198.18.50.{}", i + 1)
    }

    pub fn up(hosts: usize) -> Lan {
        let tag = format!(
            "lsl{}{}",
            std::process::id() % 100_000,
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = std::env::temp_dir().join(format!("landspeed-{tag}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut lan = Lan {
            ns: (0..hosts).map(|i| format!("{tag}-h{i}")).collect(),
            switch: format!("{tag}-sw"),
            servers: (0..hosts).map(|_| None).collect(),
            dir,
        };
        ip(&["netns", "add", &lan.switch]);
        ip(&["-n", &lan.switch, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &lan.switch, "link", "set", "br0", "up"]);
        for i in 0..hosts {
            let n = lan.ns[i].clone();
            ip(&["netns", "add", &n]);
            ip(&["-n", &n, "link", "set", "lo", "up"]);
            let port = format!("p{i}");
            ip(&[
                "link",
                "add",
                "eth0",
                "netns",
                &n,
                "type",
                "veth",
                "peer",
                "name",
                &port,
                "netns",
                &lan.switch,
            ]);
            ip(&["-n", &lan.switch, "link", "set", &port, "master", "br0"]);
            ip(&["-n", &lan.switch, "link", "set", &port, "up"]);
            ip(&[
                "-n",
                &n,
                "addr",
                "add",
                &format!("{}/24", Lan::addr(i)),
                "dev",
                "eth0",
            ]);
            ip(&["-n", &n, "link", "set", "eth0", "up"]);
        }
        // Bridges wait before forwarding unless told not to.
        ip(&[
            "-n",
            &lan.switch,
            "link",
            "set",
            "br0",
            "type",
            "bridge",
            "forward_delay",
            "0",
        ]);
        lan.servers.truncate(hosts);
        lan
    }

    /// A key file every server and controller of this LAN shares: key `ops`.
    pub fn key(&self) -> String {
        use std::os::unix::fs::PermissionsExt;
        let p = self.dir.join("keys");
        std::fs::write(&p, "ops 0123456789abcdef0123456789\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        p.display().to_string()
    }

    /// `landspeed serve ARGS` on host `i`, waited for until it listens.
    pub fn serve(&mut self, i: usize, args: &[&str]) {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.ns[i], bin(), "serve"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn server");
        let out = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(out).read_line(&mut line).unwrap();
        self.servers[i] = Some(child);
        assert!(line.contains("listening"), "server said {line:?}");
    }

    /// Kills host `i`'s server at once (SIGKILL), as a crash would.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.servers[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Established TCP connections on port 5201 in host `i`.
    pub fn established(&self, i: usize) -> usize {
        let o = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ns[i],
                "ss",
                "-Htn",
                "state",
                "established",
                "( sport = :5201 )",
            ])
            .output()
            .expect("ss");
        String::from_utf8_lossy(&o.stdout).lines().count()
    }

    /// `landspeed ARGS` on host `i`, started (for tests that act while it runs).
    pub fn spawn(&self, i: usize, args: &[&str]) -> Child {
        Command::new("ip")
            .args(["netns", "exec", &self.ns[i], bin()])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn landspeed")
    }

    /// `landspeed ARGS` on host `i`, to the end.
    pub fn landspeed(&self, i: usize, args: &[&str], timeout: Duration) -> Outcome {
        let out = super::wait_output(self.spawn(i, args), timeout).unwrap_or_else(|| panic!("{args:?} hung"));
        Outcome {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        for i in 0..self.servers.len() {
            self.kill(i);
        }
        for n in self.ns.iter().chain(std::iter::once(&self.switch)) {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
