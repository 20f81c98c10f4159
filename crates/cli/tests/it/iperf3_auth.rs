//! iperf3's own RSA authentication, judged by iperf3's code: iperf3 3.21's client (built from
//! iperf3's source by .ci/run) and Debian's 3.12 authenticate to a landspeed server that requires it
//! (a keyed one admits them by it), a wrong password or none is refused in iperf3's words, and the
//! drop-in's client authenticates to iperf3 3.21's own server, in both paddings. Keys are made with
//! openssl as iperf3's documentation makes them.

use crate::common;

use common::{landspeed, ServerProc};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// iperf3 3.21+: LANDSPEED_IPERF3_321, else where .ci/run builds it.
pub(crate) fn iperf3_321() -> Option<PathBuf> {
    let default = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/peers/iperf3-3.21/bin/iperf3");
    let path = std::env::var_os("LANDSPEED_IPERF3_321").map_or(default, PathBuf::from);
    if path.is_file() {
        Some(path)
    } else {
        common::missing(&format!(
            "iperf3 3.21 is missing at {} (build esnet/iperf 3.21+ with ./configure --disable-shared \
             --prefix=target/peers/iperf3-3.21 && make install, or set LANDSPEED_IPERF3_321; .ci/run \
             does)",
            path.display()
        ))
    }
}

/// A private key (PKCS #8 and the traditional PKCS #1 form), its public key, and a users file
/// holding mario:rossi, as iperf3's documentation makes them.
fn keys(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("landspeed-iperf3-auth-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sh = |cmd: &str| {
        let o = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{cmd}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    sh("openssl genrsa -out private.pem 2048");
    sh("openssl rsa -in private.pem -pubout -out public.pem");
    sh("openssl rsa -in private.pem -out private_not_protected.pem -outform PEM -traditional");
    sh("printf 'mario,%s\\n' \"$(printf '{mario}rossi' | sha256sum | cut -d' ' -f1)\" > users.csv");
    sh("printf 'alice %s\\n' \"$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n')\" > keys");
    for f in ["private.pem", "private_not_protected.pem", "keys"] {
        std::fs::set_permissions(dir.join(f), std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    dir
}

/// `serve` flags that require iperf3's authentication with the keys in `dir`, and `more`.
fn rsa_server(dir: &Path, more: &[&str]) -> ServerProc {
    let d = |f: &str| dir.join(f).display().to_string();
    let (key, users) = (d("private.pem"), d("users.csv"));
    let mut args = vec!["--iperf3-rsa-key", &key, "--iperf3-users", &users];
    args.extend(more);
    ServerProc::start("127.0.0.1", &args)
}

fn iperf3(bin: &Path, port: u16, password: Option<&str>, extra: &[&str]) -> Output {
    common::share();
    let mut cmd = Command::new(bin);
    cmd.args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1"])
        .args(extra);
    match password {
        Some(p) => cmd.env("IPERF3_PASSWORD", p),
        None => cmd.env_remove("IPERF3_PASSWORD"),
    };
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("iperf3 runs");
    common::wait_output(child, Duration::from_secs(30)).expect("iperf3 ends")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn iperf3_clients_authenticate_iperf3s_way_to_a_keyed_landspeed_server() {
    let Some(i321) = iperf3_321() else { return };
    let _alone = common::one_iperf3_test();
    let dir = keys("server");
    let d = |f: &str| dir.join(f).display().to_string();
    let s = rsa_server(&dir, &["--auth-keys", &d("keys")]);
    let creds = ["--username", "mario", "--rsa-public-key-path", &d("public.pem")];
    let o = iperf3(&i321, s.port, Some("rossi"), &creds);
    assert!(o.status.success(), "{}", text(&o));
    let line = common::line_with(&s, "test from");
    assert!(
        line.contains("(iperf3 user mario)") && line.ends_with(": ok"),
        "{line}"
    );
    // UDP too.
    let udp = [&creds[..], &["-u", "-b", "10M"]].concat();
    assert!(iperf3(&i321, s.port, Some("rossi"), &udp).status.success());
    // A wrong password and no credentials: iperf3's own words, and a refusal in the log.
    for (password, args, why) in [
        (Some("wrong"), &creds[..], "not in the authorized users file"),
        (None, &[][..], "sent no credentials"),
    ] {
        let o = iperf3(&i321, s.port, password, args);
        assert!(
            !o.status.success() && text(&o).contains("test authorization failed"),
            "{}",
            text(&o)
        );
        assert!(common::line_with(&s, "refused").contains(why));
    }
    // Debian's iperf3 3.12 pads with PKCS #1 v1.5, as a server told so takes it.
    let pkcs1 = rsa_server(&dir, &["--iperf3-pkcs1"]);
    let o = iperf3(Path::new("iperf3"), pkcs1.port, Some("rossi"), &creds);
    assert!(o.status.success(), "iperf3 3.12: {}", text(&o));
}

#[test]
fn the_drop_in_authenticates_to_iperf3s_own_server_in_both_paddings() {
    let Some(i321) = iperf3_321() else { return };
    let _alone = common::one_iperf3_test();
    let dir = keys("client");
    let d = |f: &str| dir.join(f).display().to_string();
    for pkcs1 in [false, true] {
        let port = common::free_port();
        let mut args = vec![
            "-s".to_string(),
            "-B".into(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
            "--rsa-private-key-path".into(),
            d("private_not_protected.pem"),
            "--authorized-users-path".into(),
            d("users.csv"),
        ];
        if pkcs1 {
            args.push("--use-pkcs1-padding".into());
        }
        let mut server = Command::new(&i321)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        common::wait_until(Duration::from_secs(5), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        let p = port.to_string();
        let mut run = vec!["iperf3", "-c", "127.0.0.1", "-p", &p, "-t", "1"];
        run.extend(["--username", "mario", "--rsa-public-key-path"]);
        let public = d("public.pem");
        run.push(&public);
        if pkcs1 {
            run.push("--use-pkcs1-padding");
        }
        let good = common::outcome(
            {
                let mut c = Command::new(common::bin());
                c.args(&run).env("IPERF3_PASSWORD", "rossi");
                c
            },
            Duration::from_secs(30),
        );
        assert_eq!(good.code, 0, "pkcs1 {pkcs1}: {}{}", good.stdout, good.stderr);
        assert!(good.stdout.contains("iperf Done."), "{}", good.stdout);
        let bad = common::outcome(
            {
                let mut c = Command::new(common::bin());
                c.args(&run).env("IPERF3_PASSWORD", "wrong");
                c
            },
            Duration::from_secs(30),
        );
        assert_ne!(bad.code, 0, "pkcs1 {pkcs1}: a wrong password was taken");
        let _ = server.kill();
        let _ = server.wait();
    }
    // Without the password the drop-in says what it needs, as a parameter error.
    let o = landspeed(
        &[
            "iperf3",
            "-c",
            "127.0.0.1",
            "--username",
            "mario",
            "--rsa-public-key-path",
            &d("public.pem"),
        ],
        Duration::from_secs(10),
    );
    assert_ne!(o.code, 0);
    assert!(
        format!("{}{}", o.stdout, o.stderr).contains("IPERF3_PASSWORD"),
        "{}",
        o.stderr
    );
}

/// Runs `landspeed ARGS` on a pseudo-terminal (python3's pty module) without IPERF3_PASSWORD, typing
/// `typed` and Enter once it prompts: its exit code and everything the terminal showed.
fn on_terminal(args: &[&str], typed: &str) -> (i32, String) {
    const SCRIPT: &str = r#"
import os, pty, select, sys, termios, time
typed, argv = sys.argv[1], sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    os.environ.pop("IPERF3_PASSWORD", None)
    os.execv(argv[0], argv)
out, sent, end = b"", False, time.monotonic() + 30
# Typed once the prompt is out and the terminal's echo is off (the master reads the terminal's
# modes), so what is typed is never echoed by the line discipline before the program turns it off.
def ready():
    return not sent and b"Password: " in out and not termios.tcgetattr(fd)[3] & termios.ECHO
while time.monotonic() < end:
    r, _, _ = select.select([fd], [], [], 0.05)
    if ready():
        os.write(fd, typed.encode() + b"\n")
        sent = True
    if not r:
        continue
    try:
        data = os.read(fd, 4096)
    except OSError:
        break
    if not data:
        break
    out += data
if time.monotonic() >= end:
    os.kill(pid, 9)
_, status = os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
sys.exit(os.waitstatus_to_exitcode(status))
"#;
    common::share();
    let child = Command::new("python3")
        .args(["-c", SCRIPT, typed, common::bin()])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 (CI has it)");
    let o = common::wait_output(child, Duration::from_secs(40)).expect("the terminal run ends");
    (o.status.code().unwrap_or(-1), text(&o))
}

#[test]
fn the_drop_in_asks_for_the_password_on_a_terminal_as_iperf3_does() {
    let dir = keys("prompt");
    let d = |f: &str| dir.join(f).display().to_string();
    let s = rsa_server(&dir, &[]);
    let (p, public) = (s.port.to_string(), d("public.pem"));
    let run = [
        "iperf3",
        "-c",
        "127.0.0.1",
        "-p",
        &p,
        "-t",
        "0.3",
        "--username",
        "mario",
        "--rsa-public-key-path",
        &public,
    ];
    let (code, shown) = on_terminal(&run, "rossi");
    assert_eq!(code, 0, "{shown}");
    assert!(
        shown.contains("Password: ") && shown.contains("iperf Done."),
        "{shown}"
    );
    assert!(!shown.contains("rossi"), "the password was echoed: {shown}");
    assert!(common::line_with(&s, "test from").contains("(iperf3 user mario)"));
    let (code, shown) = on_terminal(&run, "wrong");
    assert_ne!(code, 0, "a wrong typed password was taken: {shown}");
    assert!(shown.contains("test authorization failed"), "{shown}");
    // Not on a terminal (standard input from /dev/null, as under a scheduler): iperf3's words.
    let o = common::outcome(
        {
            let mut c = Command::new(common::bin());
            c.args(run).env_remove("IPERF3_PASSWORD").stdin(Stdio::null());
            c
        },
        Duration::from_secs(10),
    );
    assert_ne!(o.code, 0);
    assert!(
        o.stderr
            .contains("parameter error - you must specify a username, password, and path"),
        "{}",
        o.stderr
    );
}
