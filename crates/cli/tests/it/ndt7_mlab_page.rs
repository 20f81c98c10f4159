//! M-Lab's own ndt7 JavaScript client (npm @m-lab/ndt7, the files M-Lab's speed-test pages load, with
//! its Web Workers) in a real browser against `landspeed serve --ndt7`: a page that loads nothing but
//! M-Lab's client is served from a small HTTP server here (workers need an http origin), headless
//! Chromium runs it, and both subtests must complete with no error, and what the client counted must
//! agree with the server's log. With CI set, a missing Chromium or npm package fails the test.

use crate::common::{self, ServerProc};
use crate::ndt7::{client_dir, http_get, log_bytes, ndt7_addr, ndt7_line, upload_allowance_b, Chromium};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The page: M-Lab's client and nothing else, its results left in `window.out` and the title set to
/// `done` when `ndt7.test` returns.
const PAGE: &str = r#"<!doctype html><html><head><title>running</title>
<script>window.out = { errors: [], server: { download: 0, upload: 0 } };
window.onerror = (m) => { window.out.errors.push('script error: ' + m); };</script>
<script src="/ndt7.js"></script></head><body><script>
const count = (t) => (m) => { if (m.Source === 'server') window.out.server[t] += 1; };
ndt7.test({
  server: 'NDT7_ADDR', protocol: 'ws', userAcceptedDataPolicy: true,
  downloadworkerfile: '/ndt7-download-worker.js', uploadworkerfile: '/ndt7-upload-worker.js',
  metadata: { client_name: 'mlab-js-in-chromium' },
}, {
  error: (e) => window.out.errors.push(String(e)),
  downloadMeasurement: count('download'), uploadMeasurement: count('upload'),
  downloadComplete: (d) => { window.out.download = d; },
  uploadComplete: (d) => { window.out.upload = d; },
}).then((code) => { window.out.code = code; document.title = 'done'; },
        (e) => { window.out.errors.push(String(e)); document.title = 'done'; });
</script></body></html>"#;

/// A plain HTTP server for the page and M-Lab's three script files, until dropped.
struct PageServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl PageServer {
    fn start(page: String, scripts: PathBuf) -> PageServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopped.load(Ordering::Relaxed) {
                    break;
                }
                if let Ok(c) = conn {
                    answer(c, &page, &scripts);
                }
            }
        });
        PageServer { addr, stop }
    }
}

impl Drop for PageServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accepting thread so that it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

/// One request: the page at `/`, a script from M-Lab's package by name, else 404.
fn answer(c: TcpStream, page: &str, scripts: &std::path::Path) {
    let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
    let mut r = BufReader::new(&c);
    let mut first = String::new();
    let _ = r.read_line(&mut first);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).map_or(true, |n| n == 0) || line.trim().is_empty() {
            break;
        }
    }
    let path = first.split_whitespace().nth(1).unwrap_or("/");
    let (status, kind, body) = match path {
        "/" => ("200 OK", "text/html", page.as_bytes().to_vec()),
        "/ndt7.js" | "/ndt7-download-worker.js" | "/ndt7-upload-worker.js" => {
            match std::fs::read(scripts.join(&path[1..])) {
                Ok(b) => ("200 OK", "application/javascript", b),
                Err(_) => ("404 Not Found", "text/plain", b"missing".to_vec()),
            }
        }
        _ => ("404 Not Found", "text/plain", b"not here".to_vec()),
    };
    let mut w = &c;
    let _ = write!(
        w,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = w.write_all(&body);
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn m_labs_client_runs_both_subtests_in_a_real_browser() {
    let Some(exe) = crate::browser::chromium() else {
        return;
    };
    let scripts = client_dir().join("node_modules/@m-lab/ndt7/src");
    if !scripts.join("ndt7.js").is_file() {
        common::missing::<()>("tests/peers/ndt7js's npm packages are missing (npm ci there)");
        return;
    }
    let s = ServerProc::start("127.0.0.1", &["--ndt7", "127.0.0.1:0", "--ndt7-plain"]);
    let page = PAGE.replace("NDT7_ADDR", &ndt7_addr(&s).to_string());
    let web = PageServer::start(page, scripts);
    assert!(http_get(web.addr, "/ndt7.js").contains("window.ndt7"));
    let profile = std::env::temp_dir().join(format!("landspeed-mlab-page-{}", std::process::id()));
    let mut c = Chromium::open(&exe, &format!("http://{}/", web.addr), &profile);
    let done = common::wait_until(Duration::from_secs(60), || c.eval("document.title") == "done");
    let out = c.eval("window.out");
    drop(c);
    let _ = std::fs::remove_dir_all(&profile);
    assert!(done, "M-Lab's client never finished: {out}");
    assert_eq!(out["errors"], serde_json::json!([]), "{out}");
    assert_eq!(out["code"], 0, "{out}");
    // Both subtests ran to the end, with the server's measurements seen by the client.
    for t in ["download", "upload"] {
        assert!(num(&out["server"][t]) >= 10.0, "{t}: {out}");
        let mbps = num(&out[t]["LastClientMeasurement"]["MeanClientMbps"]);
        assert!(mbps > 10.0, "{t}: {mbps} Mbit/s: {out}");
    }
    // What the client counted agrees with the server's log. Download: the client counts every
    // message (the measurements' text too), the server its binary ones. Upload: the client counts what
    // left its buffer, the server what arrived, up to the buffer `close()` still sends.
    let down = ndt7_line(&s);
    let up = ndt7_line(&s);
    for line in [&down, &up] {
        assert!(
            line.contains("client_name=mlab-js-in-chromium") && line.ends_with(": ok"),
            "{line}"
        );
    }
    let sent = log_bytes(&down, "sent") as f64;
    let got = num(&out["download"]["LastClientMeasurement"]["NumBytes"]);
    assert!(
        got <= sent * 1.01 && got >= sent * 0.8,
        "client got {got}, server sent {sent}"
    );
    let received = log_bytes(&up, "received") as f64;
    let put = num(&out["upload"]["LastClientMeasurement"]["NumBytes"]);
    let elapsed = num(&out["upload"]["LastClientMeasurement"]["ElapsedTime"]);
    assert!(
        received > 0.0 && received <= put + upload_allowance_b(put, elapsed) && received >= put * 0.8,
        "server received {received}, client sent {put} at {elapsed} s"
    );
    let server_said = num(&out["upload"]["LastServerMeasurement"]["AppInfo"]["NumBytes"]);
    assert!(
        server_said <= received,
        "server measurement {server_said}, log {received}"
    );
}
