//! The results message each end sends after the test (client first): CPU use, whether the sender knows
//! retransmits, and per stream its byte count and the UDP figures. Parsed liberally (integers or
//! floats, optional keys), because iperf3 versions differ.

use serde_json::{json, Map, Value};

/// One stream's figures in a results message.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamResult {
    /// iperf3's stream id (1, 3, 4, ...: `stream_id`).
    pub id: i64,
    /// Bytes the stream moved after the warm-up.
    pub bytes: u64,
    /// Retransmitted segments (a TCP sender), else -1.
    pub retransmits: i64,
    /// UDP receiver: jitter, seconds.
    pub jitter_s: f64,
    /// UDP receiver: datagrams lost.
    pub errors: i64,
    /// UDP receiver: datagrams lost during the warm-up.
    pub omitted_errors: i64,
    /// UDP: datagrams sent (sender) or expected (receiver: the highest sequence number seen).
    pub packets: i64,
    /// UDP: datagrams of the warm-up.
    pub omitted_packets: i64,
    /// When the stream started, seconds after the warm-up.
    pub start_time_s: f64,
    /// When the stream ended, seconds after the warm-up.
    pub end_time_s: f64,
    /// landspeed's extension (key `landspeed`, which iperf3 ignores): what a receiving landspeed end
    /// checked of this stream, when both ends agreed on the payload (`State::LandspeedPayload`).
    pub verified: Option<Verified>,
}

/// What a receiving landspeed end checked of one stream over iperf3's protocol: every byte it
/// received, warm-up included.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Verified {
    /// Bytes checked against the pattern.
    pub bytes_verified: u64,
    /// 256-byte blocks with at least one wrong byte.
    pub corrupt_blocks: u64,
    /// The first wrong byte, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_corruption: Option<landspeed_core::payload::Corruption>,
}

/// One end's results message (EXCHANGE_RESULTS).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Results {
    /// This end's process CPU use, user and system, percent of the wall time.
    pub cpu_util_total: f64,
    /// This end's user CPU, percent of the wall time.
    pub cpu_util_user: f64,
    /// This end's system CPU, percent of the wall time.
    pub cpu_util_system: f64,
    /// 1 or 0 when this end sent (and knows retransmits or not), -1 when it only received.
    pub sender_has_retransmits: i64,
    /// The congestion control a sending end used.
    pub congestion_used: Option<String>,
    /// The server's own text output, when the client asked for it.
    pub server_output_text: Option<String>,
    /// The server's own JSON output, when the client asked for it with -J.
    pub server_output_json: Option<Value>,
    /// Every stream of this end.
    pub streams: Vec<StreamResult>,
}

/// iperf3 numbers streams 1, 3, 4, 5, ... in the order they connect; landspeed's stream `k` (0-based,
/// in connection order) is iperf3's `stream_id(k)`.
pub fn stream_id(k: u32) -> i64 {
    if k == 0 {
        1
    } else {
        i64::from(k) + 2
    }
}

/// One end's results message from what landspeed's engine measured there over `elapsed_s`, of which
/// the first `omit_s` were the warm-up (`-O`). As iperf3 resets its counters and its clock when the
/// warm-up ends, each stream's bytes leave the warm-up out and its `end_time` counts from there. UDP:
/// a sender reports what it sent; a receiver, as iperf3 does, the highest sequence number seen as its
/// packet count and the gaps as errors, with its jitter in seconds.
pub fn from_reports(
    streams: &[landspeed_core::endpoint::StreamReport],
    cpu: &landspeed_core::endpoint::CpuTimes,
    (elapsed_s, omit_s): (f64, f64),
    udp: bool,
) -> Results {
    // A test that ended inside its warm-up never reset: its clock runs from the start.
    let measured_s = if elapsed_s > omit_s {
        elapsed_s - omit_s
    } else {
        elapsed_s
    };
    use landspeed_core::endpoint::Role;
    let pct = |x: f64| {
        if cpu.wall_s > 0.0 {
            x / cpu.wall_s * 100.0
        } else {
            0.0
        }
    };
    let sends = streams.iter().any(|s| s.role == Role::Sender);
    Results {
        cpu_util_total: pct(cpu.process_user_s + cpu.process_system_s),
        cpu_util_user: pct(cpu.process_user_s),
        cpu_util_system: pct(cpu.process_system_s),
        sender_has_retransmits: if sends { 1 } else { -1 },
        streams: streams
            .iter()
            .map(|s| {
                let (packets, errors, jitter_s) = match (&s.udp, s.role) {
                    (Some(u), _) => (
                        (u.datagrams_received + u.datagrams_lost) as i64,
                        u.datagrams_lost as i64,
                        u.jitter_ms / 1000.0,
                    ),
                    (None, Role::Sender) if udp => (s.calls as i64, 0, 0.0),
                    _ => (0, 0, 0.0),
                };
                StreamResult {
                    id: stream_id(s.id),
                    bytes: s.bytes.saturating_sub(s.omitted_bytes),
                    retransmits: match (s.role, &s.tcp) {
                        (Role::Sender, Some(t)) => t.retransmits as i64,
                        (Role::Sender, None) => 0,
                        _ => -1,
                    },
                    jitter_s,
                    errors,
                    packets,
                    start_time_s: 0.0,
                    end_time_s: measured_s,
                    ..StreamResult::default()
                }
            })
            .collect(),
        ..Results::default()
    }
}

/// Per stream, the bytes counted when the warm-up (`-O`) ended: the last sample inside it. Empty when
/// there was no warm-up, or when the test ended inside it (then iperf3 never reset its counters).
pub fn warmup_bytes(
    samples: &[landspeed_core::endpoint::IntervalSample],
) -> std::collections::HashMap<u32, u64> {
    let ended = samples.last().is_some_and(|s| !s.omitted);
    samples
        .iter()
        .rev()
        .find(|s| s.omitted)
        .filter(|_| ended)
        .map(|s| s.streams.iter().map(|x| (x.id, x.bytes)).collect())
        .unwrap_or_default()
}

/// The streams as iperf3 counts them. iperf3 resets every counter when the warm-up ends, senders' and
/// receivers' alike, and none when the test ends inside it; landspeed's reports leave the warm-up out
/// of receivers only, and all of it when the test ended inside the warm-up. Here every stream's
/// `omitted_bytes` is what it had moved when the warm-up ended at this end (from its samples), or 0.
pub fn iperf3_counts(
    streams: &[landspeed_core::endpoint::StreamReport],
    samples: &[landspeed_core::endpoint::IntervalSample],
) -> Vec<landspeed_core::endpoint::StreamReport> {
    let warm = warmup_bytes(samples);
    streams
        .iter()
        .map(|s| {
            let mut s = s.clone();
            s.omitted_bytes = warm.get(&s.id).copied().unwrap_or(0).min(s.bytes);
            s
        })
        .collect()
}

/// A results message that cannot be read, and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("iperf3 results: {0}")]
pub struct ResultsError(pub String);

fn f(m: &Map<String, Value>, k: &str) -> f64 {
    m.get(k).and_then(Value::as_f64).unwrap_or(0.0)
}

fn i(m: &Map<String, Value>, k: &str) -> i64 {
    m.get(k)
        .and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|x| x as i64)))
        .unwrap_or(0)
}

impl Results {
    /// What this end checked of each stream it received (`streams` as the engine reported them, the
    /// warm-up included), for a test whose payload both ends agreed on.
    pub fn add_verification(&mut self, streams: &[landspeed_core::endpoint::StreamReport]) {
        use landspeed_core::endpoint::Role;
        for r in streams.iter().filter(|r| r.role == Role::Receiver) {
            if let Some(s) = self.streams.iter_mut().find(|s| s.id == stream_id(r.id)) {
                s.verified = Some(Verified {
                    bytes_verified: r.bytes_verified,
                    corrupt_blocks: r.corrupt_blocks,
                    first_corruption: r.first_corruption.clone(),
                });
            }
        }
    }

    /// The message's JSON, as iperf3 writes it.
    pub fn to_json(&self) -> Value {
        let streams: Vec<Value> = self
            .streams
            .iter()
            .map(|s| {
                let mut j = json!({
                    "id": s.id, "bytes": s.bytes, "retransmits": s.retransmits, "jitter": s.jitter_s,
                    "errors": s.errors, "omitted_errors": s.omitted_errors, "packets": s.packets,
                    "omitted_packets": s.omitted_packets, "start_time": s.start_time_s,
                    "end_time": s.end_time_s,
                });
                if let Some(v) = &s.verified {
                    j["landspeed"] = json!(v);
                }
                j
            })
            .collect();
        let mut v = json!({
            "cpu_util_total": self.cpu_util_total,
            "cpu_util_user": self.cpu_util_user,
            "cpu_util_system": self.cpu_util_system,
            "sender_has_retransmits": self.sender_has_retransmits,
            "streams": streams,
        });
        if let Some(c) = &self.congestion_used {
            v["congestion_used"] = json!(c);
        }
        if let Some(t) = &self.server_output_text {
            v["server_output_text"] = json!(t);
        }
        if let Some(j) = &self.server_output_json {
            v["server_output_json"] = j.clone();
        }
        v
    }

    /// Reads a results message (integers or floats, optional keys: iperf3 versions differ).
    pub fn parse(body: &[u8]) -> Result<Results, ResultsError> {
        let v: Value = serde_json::from_slice(body).map_err(|e| ResultsError(format!("not JSON: {e}")))?;
        let m = v
            .as_object()
            .ok_or_else(|| ResultsError("not a JSON object".into()))?;
        let streams = match m.get("streams") {
            None => vec![],
            Some(Value::Array(a)) => {
                a.iter()
                    .map(|s| {
                        let s = s
                            .as_object()
                            .ok_or_else(|| ResultsError("a stream is not an object".into()))?;
                        Ok(StreamResult {
                            id: i(s, "id"),
                            bytes: f(s, "bytes").max(0.0) as u64,
                            retransmits: i(s, "retransmits"),
                            jitter_s: f(s, "jitter"),
                            errors: i(s, "errors"),
                            omitted_errors: i(s, "omitted_errors"),
                            packets: i(s, "packets"),
                            omitted_packets: i(s, "omitted_packets"),
                            start_time_s: f(s, "start_time"),
                            end_time_s: f(s, "end_time"),
                            verified: match s.get("landspeed") {
                                None => None,
                                Some(v) => Some(serde_json::from_value(v.clone()).map_err(|e| {
                                    ResultsError(format!("a stream's landspeed figures: {e}"))
                                })?),
                            },
                        })
                    })
                    .collect::<Result<_, _>>()?
            }
            Some(_) => return Err(ResultsError("streams is not an array".into())),
        };
        Ok(Results {
            cpu_util_total: f(m, "cpu_util_total"),
            cpu_util_user: f(m, "cpu_util_user"),
            cpu_util_system: f(m, "cpu_util_system"),
            sender_has_retransmits: i(m, "sender_has_retransmits"),
            congestion_used: m
                .get("congestion_used")
                .and_then(Value::as_str)
                .map(str::to_string),
            server_output_text: m
                .get("server_output_text")
                .and_then(Value::as_str)
                .map(str::to_string),
            server_output_json: m.get("server_output_json").cloned(),
            streams,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warm_up_bytes_are_left_out_of_senders_as_iperf3_resets_its_counters() {
        use landspeed_core::endpoint::{IntervalSample, Role, StreamReport, StreamSample};
        let sample = |index, omitted, sent, got| IntervalSample {
            index,
            start_s: f64::from(index),
            end_s: f64::from(index + 1),
            omitted,
            streams: vec![
                StreamSample {
                    id: 0,
                    bytes: sent,
                    tcp: None,
                    udp: None,
                    reads: None,
                    trips: None,
                    trip_bins: None,
                },
                StreamSample {
                    id: 1,
                    bytes: got,
                    tcp: None,
                    udp: None,
                    reads: None,
                    trips: None,
                    trip_bins: None,
                },
            ],
        };
        let samples = [
            sample(0, true, 100, 90),
            sample(1, true, 200, 180),
            sample(2, false, 300, 270),
        ];
        assert_eq!(warmup_bytes(&samples).get(&0), Some(&200));
        let report = |id, role, omitted_bytes| StreamReport {
            bytes: 300,
            calls: 3,
            omitted_bytes,
            ..StreamReport::empty(id, landspeed_core::config::Flow::ClientToServer, role)
        };
        let counted = iperf3_counts(
            &[report(0, Role::Sender, 0), report(1, Role::Receiver, 180)],
            &samples,
        );
        assert_eq!((counted[0].omitted_bytes, counted[1].omitted_bytes), (200, 180));
        let r = from_reports(&counted, &Default::default(), (1.0, 0.0), false);
        assert_eq!((r.streams[0].bytes, r.streams[1].bytes), (100, 120));
        // No warm-up: nothing is left out.
        let none = iperf3_counts(&[report(0, Role::Sender, 0)], &samples[2..]);
        assert_eq!(none[0].omitted_bytes, 0);
        // A test that ended inside the warm-up: iperf3 never reset its counters, so everything counts
        // (landspeed's own receiver report left it all out).
        let inside = iperf3_counts(&[report(1, Role::Receiver, 300)], &samples[..2]);
        assert_eq!(inside[0].omitted_bytes, 0);
        assert!(warmup_bytes(&samples[..2]).is_empty());
    }

    #[test]
    fn stream_ids_skip_two() {
        let ids: Vec<i64> = (0..5).map(stream_id).collect();
        assert_eq!(ids, vec![1, 3, 4, 5, 6]);
    }

    #[test]
    fn round_trip_and_liberal_numbers() {
        let r = Results {
            cpu_util_total: 12.5,
            sender_has_retransmits: 1,
            congestion_used: Some("cubic".into()),
            streams: vec![StreamResult {
                id: 1,
                bytes: 123_456,
                retransmits: 3,
                end_time_s: 10.0,
                ..Default::default()
            }],
            ..Default::default()
        };
        let back = Results::parse(r.to_json().to_string().as_bytes()).unwrap();
        assert_eq!(back, r);
        // landspeed's extension survives the trip, and is absent from a plain iperf3 message.
        assert!(r.to_json()["streams"][0].get("landspeed").is_none());
        let mut checked = r.clone();
        checked.streams[0].verified = Some(Verified {
            bytes_verified: 123_456,
            corrupt_blocks: 1,
            first_corruption: Some(landspeed_core::payload::Corruption {
                stream: 0,
                offset: 77,
                expected_hex: "00".into(),
                received_hex: "01".into(),
            }),
        });
        let back = Results::parse(checked.to_json().to_string().as_bytes()).unwrap();
        assert_eq!(back, checked);
        assert!(Results::parse(br#"{"streams":[{"id":1,"landspeed":{"bytes_verified":"x"}}]}"#).is_err());
        let floats =
            br#"{"cpu_util_total":1,"sender_has_retransmits":-1.0,"streams":[{"id":3.0,"bytes":1e6}]}"#;
        let p = Results::parse(floats).unwrap();
        assert_eq!(
            (p.streams[0].id, p.streams[0].bytes, p.sender_has_retransmits),
            (3, 1_000_000, -1)
        );
        assert!(Results::parse(br#"{"streams":5}"#).is_err());
        assert!(Results::parse(b"nope").is_err());
    }
}
