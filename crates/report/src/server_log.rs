//! The server's log, rendered: one text line per event for people (`landspeed serve`), or one JSON
//! object per event for log shippers (`serve --log-json`, fields in docs/server-log.md). The time is an
//! input, so a line is the same however often it is rendered.

use landspeed_core::server_log::{ServerEvent, ServerStats, TestLog};
use landspeed_core::units::{BitRate, Bytes};
use serde_json::{json, Value};

/// The longest refusal reason a log line keeps, in characters.
const MAX_REASON_CHARS: usize = 300;
/// The longest protocol description (it names the client's software) a log line keeps, in characters.
const MAX_PROTOCOL_CHARS: usize = 200;
/// The longest name (a key's, a client's) a log line keeps, in characters.
const MAX_NAME_CHARS: usize = 64;

/// `s` made safe for one log line: control characters (a newline that would forge a second line, a
/// terminal escape) written as `\u{..}` escapes, and at most `max` characters, an ellipsis marking a cut.
pub fn clean(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max * 4));
    for (i, c) in s.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// One event as a line of text, stamped `time_utc`.
pub fn text_line(ev: &ServerEvent, time_utc: &str) -> String {
    match ev {
        ServerEvent::Listening {
            addresses,
            certificate,
            ndt7,
            rpm,
            quic_off,
        } => {
            let a: Vec<String> = addresses.iter().map(|a| a.to_string()).collect();
            let ndt7 = ndt7
                .as_ref()
                .map(|u| format!("; ndt7 at {u}"))
                .unwrap_or_default();
            let rpm = (rpm.as_ref())
                .map(|u| format!("; responsiveness (RPM) at {u}"))
                .unwrap_or_default();
            let quic = quic_off
                .as_ref()
                .map(|why| format!("; QUIC off: {why}"))
                .unwrap_or_default();
            format!(
                "landspeed {} listening on {}; TLS certificate sha256:{certificate}{ndt7}{rpm}{quic}",
                landspeed_core::SOFTWARE_VERSION,
                a.join(", ")
            )
        }
        ServerEvent::Test(t) => test_text(t, time_utc),
        ServerEvent::Refused { peer, reason, .. } => {
            format!("{time_utc} refused {peer}: {}", clean(reason, MAX_REASON_CHARS))
        }
        ServerEvent::Stats(st) => stats_text(st, time_utc),
        // Only a live view asks for these; the log has the test's line at its end.
        ServerEvent::Progress(_) => String::new(),
    }
}

fn direction(t: &TestLog) -> Option<String> {
    t.direction.map(|d| format!("{d:?}").to_lowercase())
}

/// The frames of an isochronous test this server received.
fn frames_of(t: &TestLog) -> Option<&landspeed_core::frames::FramesReport> {
    t.result.as_ref().and_then(|r| r.frames.as_ref())
}

/// `; frames W whole, L lost, K late, latency p50 / p99 ms` for an isochronous test.
fn frames_text(t: &TestLog) -> String {
    let Some(f) = frames_of(t) else {
        return String::new();
    };
    let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3}"));
    format!(
        "; frames {} whole, {} lost, {} skipped by the sender, {} late, latency p50 {} p99 {} max {} ms",
        f.complete,
        f.lost,
        f.skipped_by_sender,
        f.late,
        ms(f.latency.p50_ms),
        ms(f.latency.p99_ms),
        ms(f.latency.max_ms)
    )
}

fn test_text(t: &TestLog, time_utc: &str) -> String {
    let dir = direction(t).unwrap_or_else(|| "-".into());
    let bytes = t.bytes_received.max(t.bytes_sent);
    let rate = if t.duration_s > 0.0 {
        BitRate(bytes as f64 * 8.0 / t.duration_s).to_string()
    } else {
        "-".into()
    };
    let outcome = match (&t.error, t.corrupt_blocks) {
        (Some(e), _) => format!("FAILED: {}", clean(e, MAX_REASON_CHARS)),
        (None, 0) => "ok".to_string(),
        (None, n) => format!("CORRUPTED: {n} bad block(s) received"),
    };
    let peer = (t.peer_bytes)
        .map(|b| format!("; client reported {b} B"))
        .unwrap_or_default();
    let who = t
        .auth
        .as_ref()
        .map(|n| format!(" (both ends authenticated by key {})", clean(n, MAX_NAME_CHARS)))
        .unwrap_or_default();
    format!(
        "{time_utc} {} test from {}{who}: {} stream(s) {dir}, received {} B = {} (verified {} B) sent {} B = {} in {:.2} s ({rate}){peer}{}: {outcome}",
        clean(&t.protocol, MAX_PROTOCOL_CHARS),
        t.peer,
        t.streams,
        t.bytes_received,
        Bytes(t.bytes_received),
        t.bytes_verified,
        t.bytes_sent,
        Bytes(t.bytes_sent),
        t.duration_s,
        frames_text(t),
    )
}

fn stats_text(st: &ServerStats, time_utc: &str) -> String {
    let refused: Vec<String> = st
        .refused
        .iter()
        .map(|(k, v)| format!("{v} {}", k.label()))
        .collect();
    format!(
        "{time_utc} stats: up {:.0} s; tests {} ok, {} failed, {} running; received {} B, sent {} B; refused: {}",
        st.uptime_s,
        st.tests_ok,
        st.tests_failed,
        st.tests_running,
        st.bytes_received,
        st.bytes_sent,
        if refused.is_empty() {
            "none".to_string()
        } else {
            refused.join(", ")
        }
    )
}

/// One event as a JSON object, stamped `time_utc` (docs/server-log.md lists every field).
pub fn json_line(ev: &ServerEvent, time_utc: &str) -> Value {
    match ev {
        ServerEvent::Listening {
            addresses,
            certificate,
            ndt7,
            rpm,
            quic_off,
        } => json!({
            "time": time_utc, "event": "listening",
            "addresses": addresses.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            "certificate_sha256": certificate.to_string(),
            "ndt7": ndt7,
            "rpm": rpm,
            "quic_off": quic_off,
            "software": format!("landspeed {}", landspeed_core::SOFTWARE_VERSION),
        }),
        ServerEvent::Test(t) => {
            let mut v = json!({
                "time": time_utc, "event": "test", "protocol": t.protocol, "peer": t.peer.to_string(),
                "streams": t.streams, "direction": direction(t),
                "bytes_received": t.bytes_received, "bytes_sent": t.bytes_sent,
                "bytes_verified": t.bytes_verified, "corrupt_blocks": t.corrupt_blocks,
                "duration_s": t.duration_s, "peer_bytes": t.peer_bytes, "error": t.error, "auth": t.auth,
                "ok": t.verdict().is_trusted(),
            });
            // An isochronous client's frames, as this server counted them (docs/isochronous.md).
            if let Some(f) = frames_of(t) {
                v["frames"] = serde_json::to_value(f).unwrap_or(Value::Null);
            }
            v
        }
        ServerEvent::Refused { peer, kind, reason } => json!({
            "time": time_utc, "event": "refused", "peer": peer.to_string(), "kind": kind.label(),
            "reason": clean(reason, MAX_REASON_CHARS),
        }),
        ServerEvent::Stats(st) => json!({
            "time": time_utc, "event": "stats", "uptime_s": st.uptime_s, "tests_ok": st.tests_ok,
            "tests_failed": st.tests_failed, "tests_running": st.tests_running,
            "bytes_received": st.bytes_received, "bytes_sent": st.bytes_sent,
            "refused": st.refused.iter().map(|(k, v)| (k.label().to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        }),
        ServerEvent::Progress(_) => Value::Null,
    }
}

/// The port of the first address in a text "listening" line (what `serve -p 0` chose), for
/// programs that start a server and read its first line.
pub fn listening_port(line: &str) -> Option<u16> {
    let addrs = line.split_once(" listening on ")?.1;
    let first = addrs.split([',', ';']).next()?.trim();
    first.rsplit(':').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use landspeed_core::config::Direction;

    fn test_event(error: Option<&str>, corrupt_blocks: u64) -> ServerEvent {
        let mut t = TestLog::new("192.0.2.7:40000".parse().unwrap(), "landspeed");
        t.streams = 2;
        t.direction = Some(Direction::Reverse);
        t.bytes_sent = 2_000_000_000;
        t.duration_s = 2.0;
        t.error = error.map(str::to_string);
        t.corrupt_blocks = corrupt_blocks;
        t.auth = Some("ops".into());
        ServerEvent::Test(t)
    }

    const T: &str = "2026-11-23T18:00:00Z";

    #[test]
    fn the_listening_line_names_addresses_and_certificate_and_gives_its_port_back() {
        let certificate = landspeed_core::tls::CertFingerprint([0x5a; 32]);
        let ev = ServerEvent::Listening {
            addresses: vec!["[::]:5201".parse().unwrap(), "0.0.0.0:5201".parse().unwrap()],
            certificate,
            ndt7: None,
            rpm: None,
            quic_off: None,
        };
        let line = text_line(&ev, T);
        assert!(
            line.ends_with(&format!("; TLS certificate sha256:{certificate}")),
            "{line}"
        );
        assert_eq!(listening_port(&line), Some(5201));
        assert_eq!(json_line(&ev, T)["certificate_sha256"], certificate.to_string());
        assert_eq!(json_line(&ev, T)["ndt7"], serde_json::Value::Null);
        assert_eq!(listening_port("something else"), None);
        let with = ServerEvent::Listening {
            addresses: vec!["[::]:5201".parse().unwrap()],
            certificate,
            ndt7: Some("ws://127.0.0.1:8080".into()),
            rpm: None,
            quic_off: Some("no router".into()),
        };
        let line = text_line(&with, T);
        assert!(
            line.ends_with("; ndt7 at ws://127.0.0.1:8080; QUIC off: no router"),
            "{line}"
        );
        assert_eq!(listening_port(&line), Some(5201));
        assert_eq!(json_line(&with, T)["ndt7"], "ws://127.0.0.1:8080");
        assert_eq!(json_line(&with, T)["quic_off"], "no router");
    }

    #[test]
    fn a_test_line_says_who_what_how_fast_and_how_it_ended() {
        let line = text_line(&test_event(None, 0), T);
        assert_eq!(
            line,
            "2026-11-23T18:00:00Z landspeed test from 192.0.2.7:40000 (both ends authenticated by key ops): 2 stream(s) reverse, \
             received 0 B = 0 B (verified 0 B) sent 2000000000 B = 1.86 GiB in 2.00 s (8.00 Gbit/s): ok"
        );
        assert!(text_line(&test_event(Some("boom"), 0), T).ends_with(": FAILED: boom"));
        assert!(text_line(&test_event(None, 3), T).ends_with(": CORRUPTED: 3 bad block(s) received"));
    }

    #[test]
    fn json_lines_carry_the_documented_fields_and_the_verdict() {
        let v = json_line(&test_event(None, 0), T);
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let mut want = vec![
            "auth",
            "bytes_received",
            "bytes_sent",
            "bytes_verified",
            "corrupt_blocks",
            "direction",
            "duration_s",
            "error",
            "event",
            "ok",
            "peer",
            "peer_bytes",
            "protocol",
            "streams",
            "time",
        ];
        want.sort();
        assert_eq!(keys, want);
        assert_eq!(
            (v["ok"].as_bool(), v["direction"].as_str()),
            (Some(true), Some("reverse"))
        );
        assert_eq!(json_line(&test_event(None, 1), T)["ok"], json!(false));
        let refused = ServerEvent::Refused {
            peer: "192.0.2.8:1".parse().unwrap(),
            kind: landspeed_core::server_log::RefusalKind::Busy,
            reason: "busy".into(),
        };
        assert_eq!(
            json_line(&refused, T),
            json!({"time": T, "event": "refused", "peer": "192.0.2.8:1", "kind": "busy", "reason": "busy"})
        );
        let stats = ServerEvent::Stats(ServerStats {
            refused: vec![(landspeed_core::server_log::RefusalKind::Busy, 2)],
            ..ServerStats::default()
        });
        assert_eq!(json_line(&stats, T)["refused"], json!({"busy": 2}));
        assert!(text_line(&stats, T).ends_with("refused: 2 busy"));
    }

    #[test]
    fn what_a_peer_wrote_cannot_forge_a_line_or_grow_it_without_bound() {
        let forged = ServerEvent::Refused {
            peer: "192.0.2.8:1".parse().unwrap(),
            kind: landspeed_core::server_log::RefusalKind::Authentication,
            reason: format!(
                "authentication failed: unknown key x\n{T} ok\u{1b}[2J{}",
                "a".repeat(5000)
            ),
        };
        let line = text_line(&forged, T);
        assert!(!line.chars().any(char::is_control), "{line:?}");
        assert!(line.contains("\\u{a}") && line.contains("\\u{1b}"), "{line:?}");
        assert!(line.chars().count() < 400, "{}", line.len());
        assert!(line.ends_with('…'));
        let mut t = TestLog::new("127.0.0.1:1".parse().unwrap(), "iperf3 3.21\r\nforged");
        t.auth = Some("k\u{7}".into());
        let line = text_line(&ServerEvent::Test(t), T);
        assert!(!line.chars().any(char::is_control), "{line:?}");
    }
}
