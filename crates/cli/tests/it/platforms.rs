//! The other platforms' artifacts (issue #50, docs/install.md), held by CI: the static aarch64 binary
//! (musl, built by .ci/run with cargo-zigbuild and named by LANDSPEED_AARCH64) run under qemu-user on
//! loopback and against this build's x86_64 server, exact and verified both ways; the RPM built from
//! it with contrib/rpm/build, read with rpm's own tools and installed into a scratch root; and the
//! container image built from contrib/container/Containerfile, inspected, and run by podman serving a
//! verified test to this host. Without LANDSPEED_AARCH64 (a developer's `cargo test`) these skip,
//! and under CI they fail.

use crate::common;

use common::{free_port, ServerProc};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const QEMU: &str = "qemu-aarch64-static";

/// The static aarch64 binary and qemu-user to run it, or None (a skip; a failure under CI).
fn aarch64() -> Option<PathBuf> {
    let Some(bin) = std::env::var_os("LANDSPEED_AARCH64").map(PathBuf::from) else {
        return common::missing(
            "LANDSPEED_AARCH64 names no binary (.ci/run builds the static aarch64 one with \
             cargo zigbuild --profile cross-test --target aarch64-unknown-linux-musl)",
        );
    };
    assert!(bin.is_file(), "LANDSPEED_AARCH64={} is not a file", bin.display());
    if Command::new(QEMU).arg("--version").output().is_err() {
        return common::missing("qemu-aarch64-static is not installed (Debian's qemu-user-static)");
    }
    common::bin(); // a share of the machine: qemu runs the client at full speed
    Some(bin)
}

/// `run` against 127.0.0.1:PORT for 1 s, its result as JSON, nothing archived.
fn one_second_test(port: u16) -> Vec<String> {
    let args = [
        "run",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-t",
        "1s",
        "--json",
        "--no-save",
    ];
    args.iter().map(|a| a.to_string()).collect()
}

/// `landspeed run` of the aarch64 binary under qemu, its JSON result.
fn aarch64_client(bin: &Path, port: u16, extra: &[&str]) -> Value {
    let o = common::captured(
        Command::new(QEMU)
            .arg(bin)
            .args(one_second_test(port))
            .args(extra),
        "the aarch64 client",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("the aarch64 client's JSON")
}

/// Every byte sent arrived and was checked against the payload pattern.
fn assert_exact_and_verified(r: &Value) {
    let s = &r["summary"];
    let sent = s["bytes_sent"].as_u64().unwrap();
    assert!(sent > 0, "{s}");
    assert_eq!(s["bytes_received"], s["bytes_sent"], "{s}");
    assert_eq!(s["bytes_verified"], s["bytes_received"], "{s}");
    assert_eq!(s["corrupt_blocks"], 0, "{s}");
}

#[test]
fn the_static_aarch64_binary_says_what_it_is_and_runs_a_verified_loopback_test() {
    let Some(bin) = aarch64() else { return };
    let v = common::captured(Command::new(QEMU).arg(&bin).arg("--version"), "--version");
    let line = String::from_utf8_lossy(&v.stdout);
    assert!(
        line.contains("built for aarch64-unknown-linux-musl, static;"),
        "{line}"
    );
    let port = free_port();
    let mut server = Command::new(QEMU)
        .arg(&bin)
        .args(["serve", "--once", "-p", &port.to_string(), "--bind", "127.0.0.1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the aarch64 server");
    let up = common::wait_until(Duration::from_secs(30), || common::listening(port));
    let result = up.then(|| aarch64_client(&bin, port, &["-P", "2"]));
    let _ = server.kill();
    let _ = server.wait();
    let result = result.expect("the aarch64 server never listened");
    assert_exact_and_verified(&result);
}

#[test]
fn the_aarch64_client_and_the_x86_64_server_agree_on_every_byte_both_ways() {
    let Some(bin) = aarch64() else { return };
    let server = ServerProc::start("127.0.0.1", &[]);
    // Forward: x86_64 verifies what aarch64 sent; reverse: aarch64 verifies what x86_64 sent.
    for extra in [&[][..], &["-R"][..]] {
        let r = aarch64_client(&bin, server.port, extra);
        assert_exact_and_verified(&r);
        assert_eq!(
            r["config"]["direction"],
            if extra.is_empty() { "forward" } else { "reverse" }
        );
    }
}

fn repo(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel)
}

/// A directory removed when dropped (also when the test fails).
struct Scratch(PathBuf);

impl Scratch {
    fn new(what: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("landspeed-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn rpm(args: &[&str]) -> String {
    let o = common::captured(Command::new("rpm").args(args), "rpm");
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn the_rpm_holds_what_el_needs_checks_out_and_installs_into_a_scratch_root() {
    let Some(bin) = aarch64() else { return };
    if Command::new("rpmbuild").arg("--version").output().is_err() {
        common::missing::<()>("rpmbuild is not installed (Debian's rpm)");
        return;
    }
    let out = Scratch::new("rpm");
    let built = common::captured(
        Command::new(repo("contrib/rpm/build"))
            .arg(&bin)
            .arg("aarch64")
            .arg(&out.0)
            .arg(common::bin()),
        "contrib/rpm/build",
    );
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let main = out.0.join("landspeed-0.1.0-1.aarch64.rpm");
    let tool = out.0.join("landspeed-pscheduler-0.1.0-1.aarch64.rpm");
    let (main_s, tool_s) = (main.to_str().unwrap(), tool.to_str().unwrap());
    let files = rpm(&["-qpl", main_s]);
    for f in [
        "/usr/bin/landspeed",
        "/usr/lib/landspeed/iperf3",
        "/usr/lib/systemd/system/landspeed.service",
        "/usr/share/man/man1/landspeed-serve.1.gz",
        "/usr/share/bash-completion/completions/landspeed",
        "/etc/landspeed/landspeed.conf",
    ] {
        assert!(files.lines().any(|l| l == f), "{f} not in\n{files}");
    }
    let tool_files = rpm(&["-qpl", tool_s]);
    assert!(
        tool_files.contains("/usr/libexec/pscheduler/classes/tool/landspeed/run"),
        "{tool_files}"
    );
    let checked = rpm(&["-K", main_s, tool_s]);
    assert_eq!(checked.matches("digests OK").count(), 2, "{checked}");
    let scripts = rpm(&["-qp", "--scripts", main_s]);
    assert!(scripts.contains("useradd -r -g landspeed"), "{scripts}");
    assert!(rpm(&["-qp", "--requires", tool_s]).contains("pscheduler-server"));
    installed_into_a_scratch_root(main_s, tool_s);
}

/// A root of its own: the tool's missing dependency named, then the package's files, its binary run.
fn installed_into_a_scratch_root(main: &str, tool: &str) {
    let root = Scratch::new("rpm-root");
    let r = root.0.to_str().unwrap();
    rpm(&["--root", r, "--initdb"]);
    let refused = rpm(&["--root", r, "-i", "--ignorearch", tool]);
    assert!(
        refused.contains("pscheduler-server is needed by landspeed-pscheduler"),
        "{refused}"
    );
    // No shell in an empty root for the scriptlets (read above): files only.
    let done = rpm(&["--root", r, "-i", "--ignorearch", "--nodeps", "--noscripts", main]);
    assert!(
        rpm(&["--root", r, "-q", "landspeed"]).starts_with("landspeed-0.1.0-1"),
        "{done}"
    );
    let link = std::fs::read_link(root.0.join("usr/lib/landspeed/iperf3")).unwrap();
    assert_eq!(link, Path::new("../../bin/landspeed"));
    let v = common::captured(
        Command::new(QEMU)
            .arg(root.0.join("usr/bin/landspeed"))
            .arg("--version"),
        "landspeed from the scratch root",
    );
    let said = String::from_utf8_lossy(&v.stdout);
    assert!(
        said.starts_with("landspeed 0.1.0"),
        "{said}{}",
        String::from_utf8_lossy(&v.stderr)
    );
}

/// The test's image and container, removed when dropped (also when the test fails).
struct Podman {
    image: String,
    container: String,
}

impl Drop for Podman {
    fn drop(&mut self) {
        let _ = Command::new("podman")
            .args(["rm", "-f", "-t", "0", &self.container])
            .output();
        let _ = Command::new("podman").args(["rmi", "-f", &self.image]).output();
    }
}

fn podman(args: &[&str]) -> Output {
    common::captured(Command::new("podman").args(args), "podman")
}

#[test]
fn the_container_image_is_from_scratch_unprivileged_and_serves_a_verified_test_to_the_host() {
    let Some(bin) = aarch64() else { return };
    if Command::new("podman").arg("--version").output().is_err() {
        common::missing::<()>("podman is not installed");
        return;
    }
    let ctx = Scratch::new("image");
    std::fs::copy(&bin, ctx.0.join("landspeed")).unwrap();
    let p = Podman {
        image: format!("localhost/landspeed-test:{}", std::process::id()),
        container: format!("landspeed-test-{}", std::process::id()),
    };
    let file = repo("contrib/container/Containerfile");
    let built = podman(&[
        "build",
        "-q",
        // No intermediate image left behind by the build.
        "--layers=false",
        "--arch",
        "arm64",
        "-t",
        &p.image,
        "-f",
        file.to_str().unwrap(),
        ctx.0.to_str().unwrap(),
    ]);
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let inspect = podman(&["image", "inspect", &p.image]);
    let v: Value = serde_json::from_slice(&inspect.stdout).expect("podman image inspect's JSON");
    let config = &v[0]["Config"];
    assert_eq!(config["User"], "65534:65534", "{config}");
    assert_eq!(
        config["Entrypoint"],
        serde_json::json!(["/usr/bin/landspeed", "serve"]),
        "{config}"
    );
    for port in ["5201/tcp", "5201/udp"] {
        assert!(config["ExposedPorts"].get(port).is_some(), "{port}: {config}");
    }
    assert_eq!(v[0]["Architecture"], "arm64");
    let layers = v[0]["RootFS"]["Layers"].as_array().unwrap().len();
    assert_eq!(layers, 1, "from scratch: the binary's layer alone");
    served_from_the_container(&p);
}

/// The image's own files, user and read-only root, its arm64 binary run by qemu-user (this host has no
/// binfmt handler for arm64, so qemu is mounted in and named as the entrypoint; the entrypoint itself
/// is checked by the inspection above). runc and explicit limits: this sandbox's crun refuses its
/// hybrid cgroups, and podman's default open-file and process limits are above the machine's.
fn served_from_the_container(p: &Podman) {
    let port = free_port();
    let qemu = which(QEMU);
    let mount = format!("{}:/qemu:ro", qemu.display());
    let run = podman(&[
        "run",
        "-d",
        "--name",
        &p.container,
        "--runtime",
        "runc",
        "--read-only",
        "--network",
        "host",
        "--ulimit",
        "nofile=4096:4096",
        "--ulimit",
        "nproc=4096:4096",
        "-v",
        &mount,
        "--entrypoint",
        "/qemu",
        &p.image,
        "/usr/bin/landspeed",
        "serve",
        "--once",
        "-p",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
    ]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let up = common::wait_until(Duration::from_secs(30), || common::listening(port));
    let logs = || String::from_utf8_lossy(&podman(&["logs", &p.container]).stderr).into_owned();
    assert!(up, "the container's server never listened: {}", logs());
    let o = common::captured(
        Command::new(common::bin()).args(one_second_test(port)),
        "the host's client",
    );
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stderr),
        logs()
    );
    assert_exact_and_verified(&serde_json::from_slice(&o.stdout).unwrap());
}

fn which(name: &str) -> PathBuf {
    let o = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .unwrap();
    PathBuf::from(String::from_utf8_lossy(&o.stdout).trim())
}
