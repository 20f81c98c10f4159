//! Multicast tests, sans-IO. A sender sends to a group and any number of receivers that joined it
//! count what reaches them; no receiver talks back, so every datagram has to say by itself what the
//! receiver needs: which test it belongs to, its place in the test, when it was sent, and (at the
//! end) how many were sent. This module holds landspeed's multicast datagram and a receiver's
//! accounting of every sender it hears (`Group`), both free of sockets and clocks, so that each
//! figure is tested with made-up arrivals.
//!
//! landspeed's multicast datagram (big-endian): the sequence number (u64 from 0; its top bit set
//! marks the end, whose lower bits are the count sent), the sender's clock at sending (u64 Unix
//! nanoseconds), the magic `LSMC`, the test's key (u64), when the sender started (u64 Unix
//! nanoseconds), then payload from the pattern of that key at offset `seq × payload length` (stream
//! 0), so every byte of every datagram is checked like a TCP stream's. The end carries no payload and
//! is sent a few times. A receiver that had joined before the sender started counts every datagram
//! from the first; one that joined later counts from the first it heard (the two clocks decide which,
//! so within their offset of the start a receiver may count from where it began hearing). iperf 2's multicast datagrams
//! (counted, not verified: their payload is not a pattern) are read by the I/O layer and given here
//! as [`Arrival::Foreign`].

use crate::payload::{Corruption, Pattern, Verifier};
use crate::transactions::{SignedMoments, SignedSummary};
use crate::udp::{Header, UdpReceiver, UdpStats};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::SocketAddr;

pub mod record;
#[cfg(test)]
mod tests;

/// The magic after the sequence number and the send time.
pub const MAGIC: [u8; 4] = *b"LSMC";
/// Bytes of landspeed's multicast header.
pub const HEADER_BYTES: usize = 36;
/// The bit of the sequence word that marks the end.
const END_BIT: u64 = 1 << 63;
/// Senders a receiver keeps figures for; datagrams of any more are counted as ignored.
pub const MAX_SOURCES: usize = 256;

/// One datagram of landspeed's multicast, read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McHeader {
    /// A datagram of the test: its sequence number, send time and the test's key.
    Data {
        /// From 0.
        seq: u64,
        /// The sender's clock, Unix nanoseconds.
        sent_ns: u64,
        /// The test's key (its pattern's).
        key: u64,
        /// When the sender started, Unix nanoseconds.
        start_ns: u64,
    },
    /// The end: how many datagrams the sender sent.
    End {
        /// Datagrams of the test sent.
        sent: u64,
        /// The sender's clock, Unix nanoseconds.
        sent_ns: u64,
        /// The test's key.
        key: u64,
        /// When the sender started, Unix nanoseconds.
        start_ns: u64,
    },
}

impl McHeader {
    /// Reads the header; None when the datagram is not landspeed's multicast.
    pub fn read(b: &[u8]) -> Option<McHeader> {
        if b.len() < HEADER_BYTES || b[16..20] != MAGIC {
            return None;
        }
        let word = |at: usize| u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        let (seq, sent_ns, key, start_ns) = (word(0), word(8), word(20), word(28));
        Some(if seq & END_BIT != 0 {
            McHeader::End {
                sent: seq & !END_BIT,
                sent_ns,
                key,
                start_ns,
            }
        } else {
            McHeader::Data {
                seq,
                sent_ns,
                key,
                start_ns,
            }
        })
    }

    /// Writes the header at the start of `buf` (at least [`HEADER_BYTES`]).
    pub fn write(&self, buf: &mut [u8]) {
        let (seq, sent_ns, key, start_ns) = match *self {
            McHeader::Data {
                seq,
                sent_ns,
                key,
                start_ns,
            } => (seq & !END_BIT, sent_ns, key, start_ns),
            McHeader::End {
                sent,
                sent_ns,
                key,
                start_ns,
            } => (sent | END_BIT, sent_ns, key, start_ns),
        };
        buf[..8].copy_from_slice(&seq.to_be_bytes());
        buf[8..16].copy_from_slice(&sent_ns.to_be_bytes());
        buf[16..20].copy_from_slice(&MAGIC);
        buf[20..28].copy_from_slice(&key.to_be_bytes());
        buf[28..36].copy_from_slice(&start_ns.to_be_bytes());
    }
}

/// Writes data datagram `seq` of a test started at `start_ns` whose datagrams are `buf.len()` bytes.
pub fn write_data(buf: &mut [u8], pattern: &Pattern, seq: u64, (start_ns, sent_ns): (u64, u64)) {
    McHeader::Data {
        seq,
        sent_ns,
        key: pattern.key(),
        start_ns,
    }
    .write(buf);
    let payload = buf.len() - HEADER_BYTES;
    pattern.expected(0, seq * payload as u64, &mut buf[HEADER_BYTES..]);
}

/// What the I/O layer read from one datagram.
#[derive(Debug, Clone, Copy)]
pub enum Arrival<'a> {
    /// landspeed's multicast datagram, whole.
    Landspeed(&'a [u8]),
    /// Another tool's datagram (iperf 2's), already read: counted, not verified.
    Foreign {
        /// The tool.
        protocol: &'static str,
        /// Its sequence number, from 0.
        seq: u64,
        /// Its send time, Unix nanoseconds.
        sent_ns: u64,
        /// Its size.
        len: usize,
        /// When it ends the test: the datagrams sent in all (itself included).
        end_of: Option<u64>,
    },
}

/// A sender as a receiver knows it: where its datagrams come from and the test they carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct SourceId {
    from: SocketAddr,
    key: Option<u64>,
}

/// One sender's datagrams at one receiver.
struct Source {
    protocol: &'static str,
    from: SocketAddr,
    key: Option<u64>,
    /// The first sequence number heard (a receiver that joined late counts from it).
    first_seq: u64,
    recv: UdpReceiver,
    verifier: Option<Verifier>,
    /// Data datagrams' length (landspeed's: all of a test's are alike).
    length: Option<usize>,
    corrupt: u64,
    first_corruption: Option<Corruption>,
    delay: SignedMoments,
    sent: Option<u64>,
    first_ns: u64,
    last_ns: u64,
    ended_ns: Option<u64>,
}

/// A receiver's figures for one sender.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceReport {
    /// `landspeed` or the other tool's name (`iperf2`).
    pub protocol: String,
    /// The sender's address and port.
    pub from: SocketAddr,
    /// The test's key, hex (landspeed's senders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The first sequence number heard: datagrams before it were sent before this receiver heard
    /// the test and are not counted as lost.
    pub first_seq: u64,
    /// Loss, order, duplicates and jitter, as the unicast receiver counts them (its `datagrams_sent`
    /// is the sender's count from `first_seq` on, known once its end arrived).
    #[serde(flatten)]
    pub udp: UdpStats,
    /// Bytes of the distinct datagrams (whole datagrams, headers included).
    pub bytes: u64,
    /// From the first datagram's arrival to the last's, seconds.
    pub span_s: f64,
    /// Bits per second over `span_s`.
    pub rate_bps: f64,
    /// Each datagram's arrival less its send time (one-way delay: as exact as the two clocks agree).
    pub one_way: Option<SignedSummary>,
    /// Whether every byte was checked and right: None for another tool's datagrams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    /// Datagrams whose payload or length was wrong.
    pub corrupt: u64,
    /// The first wrong byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_corruption: Option<Corruption>,
    /// Whether the sender's end arrived.
    pub ended: bool,
    /// When its first datagram arrived, Unix seconds (the receiver's clock).
    #[serde(default)]
    pub first_arrival_unix_s: f64,
}

/// A receiver's figures for its group.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MulticastReport {
    /// The group joined, with its port.
    pub group: String,
    /// The source asked for (SSM), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The interface joined on, if named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    /// Every sender heard, in the order first heard.
    pub sources: Vec<SourceReport>,
    /// Datagrams that were neither landspeed's nor another known tool's.
    pub unknown_datagrams: u64,
    /// Datagrams from senders beyond [`MAX_SOURCES`].
    pub ignored_datagrams: u64,
    /// Why the receiver stopped.
    pub ended_by: String,
}

/// What a sender did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendReport {
    /// `landspeed` or `iperf2` datagrams.
    pub protocol: String,
    /// The group and port.
    pub group: SocketAddr,
    /// The address and port sent from.
    pub from: SocketAddr,
    /// The test's key, hex (what each receiver reports for this sender).
    pub key: String,
    /// TTL or hop limit.
    pub ttl: u32,
    /// Datagrams sent (the end's not counted for landspeed's, counted for iperf 2's, as it counts).
    pub datagrams: u64,
    /// Bytes of them.
    pub bytes: u64,
    /// Sends the kernel refused (counted as sent: the receivers count them lost).
    pub send_errors: u64,
    /// The first send error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// Seconds sending.
    pub elapsed_s: f64,
    /// Bits per second of UDP payload sent.
    pub rate_bps: f64,
    /// When the first datagram went, Unix seconds.
    #[serde(default)]
    pub started_unix_s: f64,
}

/// A receiver's accounting of every sender on its group.
#[derive(Default)]
pub struct Group {
    /// When the receiver joined, Unix nanoseconds (its clock).
    joined_ns: u64,
    order: Vec<SourceId>,
    sources: HashMap<SourceId, Source>,
    unknown: u64,
    ignored: u64,
}

impl Group {
    /// A receiver that joined at `joined_ns` (Unix nanoseconds, its clock).
    pub fn new(joined_ns: u64) -> Group {
        Group {
            joined_ns,
            ..Group::default()
        }
    }

    /// Counts one datagram from `from` that arrived at `arrival_ns` (Unix nanoseconds).
    pub fn on_datagram(&mut self, from: SocketAddr, arrival: Arrival<'_>, arrival_ns: u64) {
        match arrival {
            Arrival::Landspeed(b) => match McHeader::read(b) {
                Some(h) => self.landspeed(from, h, b, arrival_ns),
                None => self.unknown += 1,
            },
            Arrival::Foreign {
                protocol,
                seq,
                sent_ns,
                len,
                end_of,
            } => {
                // Another tool's datagrams say nothing of when its sender started: counted from
                // its first, as iperf 2's own receiver counts them.
                let id = SourceId { from, key: None };
                if let Some(s) = self.source(id, protocol, 0, arrival_ns) {
                    s.count(seq, sent_ns, len, arrival_ns);
                    if let Some(n) = end_of {
                        s.sent = Some(n);
                        s.ended_ns = Some(arrival_ns);
                    }
                }
            }
        }
    }

    /// Counts a datagram that is not one of a known tool.
    pub fn on_unknown(&mut self) {
        self.unknown += 1;
    }

    fn landspeed(&mut self, from: SocketAddr, h: McHeader, b: &[u8], at_ns: u64) {
        let (seq, key, start_ns) = match h {
            McHeader::Data {
                seq, key, start_ns, ..
            } => (seq, key, start_ns),
            McHeader::End {
                sent, key, start_ns, ..
            } => (sent, key, start_ns),
        };
        let id = SourceId { from, key: Some(key) };
        // Joined before the sender started: its every datagram counts; later: from the first heard.
        let first = if start_ns >= self.joined_ns { 0 } else { seq };
        let Some(s) = self.source(id, "landspeed", first, at_ns) else {
            return;
        };
        match h {
            McHeader::Data { seq, sent_ns, .. } => {
                if s.count(seq, sent_ns, b.len(), at_ns) {
                    s.check(seq, b);
                }
            }
            McHeader::End { sent, .. } => {
                s.sent = Some(sent);
                s.ended_ns.get_or_insert(at_ns);
            }
        }
    }

    /// The sender's figures, made on its first datagram (None past [`MAX_SOURCES`]).
    fn source(&mut self, id: SourceId, protocol: &'static str, seq: u64, at_ns: u64) -> Option<&mut Source> {
        if !self.sources.contains_key(&id) {
            if self.sources.len() >= MAX_SOURCES {
                self.ignored += 1;
                return None;
            }
            self.order.push(id);
            self.sources.insert(id, Source::new(id, protocol, seq, at_ns));
        }
        self.sources.get_mut(&id)
    }

    /// True when at least one sender was heard and every one heard has ended.
    pub fn all_ended(&self) -> bool {
        !self.sources.is_empty() && self.sources.values().all(|s| s.ended_ns.is_some())
    }

    /// Senders heard.
    pub fn heard(&self) -> usize {
        self.sources.len()
    }

    /// The last arrival from any sender, Unix nanoseconds (0: none).
    pub fn last_arrival_ns(&self) -> u64 {
        self.sources.values().map(|s| s.last_ns).max().unwrap_or(0)
    }

    /// The figures so far.
    pub fn report(&self, group: String, ended_by: &str) -> MulticastReport {
        MulticastReport {
            group,
            source: None,
            interface: None,
            sources: self.order.iter().map(|id| self.sources[id].report()).collect(),
            unknown_datagrams: self.unknown,
            ignored_datagrams: self.ignored,
            ended_by: ended_by.to_string(),
        }
    }
}

impl Source {
    fn new(id: SourceId, protocol: &'static str, first_seq: u64, at_ns: u64) -> Source {
        Source {
            protocol,
            from: id.from,
            key: id.key,
            first_seq,
            recv: UdpReceiver::default(),
            verifier: id.key.map(|k| Verifier::new(&Pattern::new(k), 0)),
            length: None,
            corrupt: 0,
            first_corruption: None,
            delay: SignedMoments::default(),
            sent: None,
            first_ns: at_ns,
            last_ns: at_ns,
            ended_ns: None,
        }
    }

    /// Counts a datagram; false for a duplicate or one from before the first heard.
    fn count(&mut self, seq: u64, sent_ns: u64, len: usize, at_ns: u64) -> bool {
        let Some(rel) = seq.checked_sub(self.first_seq) else {
            return false;
        };
        let header = Header { seq: rel, sent_ns };
        if !self.recv.on_datagram(header, at_ns, len) {
            return false;
        }
        self.delay.add(at_ns as i64 - sent_ns as i64);
        self.last_ns = self.last_ns.max(at_ns);
        true
    }

    /// Checks a landspeed datagram's length and payload.
    fn check(&mut self, seq: u64, b: &[u8]) {
        let length = *self.length.get_or_insert(b.len());
        let Some(v) = self.verifier.as_mut() else {
            return;
        };
        let payload = (length - HEADER_BYTES) as u64;
        let wrong = if b.len() != length {
            Some(None)
        } else {
            v.check(0, seq * payload, &b[HEADER_BYTES..])
                .map(|c| Some(c.first))
        };
        if let Some(c) = wrong {
            self.corrupt += 1;
            if self.first_corruption.is_none() {
                self.first_corruption = c;
            }
        }
    }

    fn report(&self) -> SourceReport {
        let sent = self.sent.map(|n| n.saturating_sub(self.first_seq));
        let stats = self.recv.stats(sent);
        let span_s = self.last_ns.saturating_sub(self.first_ns) as f64 / 1e9;
        let bytes = self.recv.bytes();
        SourceReport {
            protocol: self.protocol.to_string(),
            from: self.from,
            key: self.key.map(|k| format!("{k:016x}")),
            first_seq: self.first_seq,
            udp: stats,
            bytes,
            span_s,
            rate_bps: if span_s > 0.0 {
                bytes as f64 * 8.0 / span_s
            } else {
                0.0
            },
            one_way: (self.delay.count() > 0).then(|| self.delay.summary()),
            verified: self
                .verifier
                .as_ref()
                .map(|_| self.corrupt == 0 && self.recv.received() > 0),
            corrupt: self.corrupt,
            first_corruption: self.first_corruption.clone(),
            ended: self.ended_ns.is_some(),
            first_arrival_unix_s: self.first_ns as f64 / 1e9,
        }
    }
}

/// Why a multicast test cannot be run as asked.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum McSpecError {
    /// The address is not a multicast group.
    #[error("{0} is not a multicast group (IPv4 224.0.0.0/4, IPv6 ff00::/8)")]
    NotAGroup(std::net::IpAddr),
    /// The source is of the other family, or itself a group.
    #[error("source {sender} cannot send to group {group} (give a unicast address of the group's family)")]
    BadSource {
        /// The group.
        group: std::net::IpAddr,
        /// The source given.
        sender: std::net::IpAddr,
    },
    /// Port 0.
    #[error("a group needs a port (1-65535)")]
    NoPort,
    /// A datagram size outside what the format and UDP allow.
    #[error("{got}-byte datagrams: between {min} and {max} bytes")]
    Length {
        /// Asked.
        got: u64,
        /// Least.
        min: u64,
        /// Most.
        max: u64,
    },
    /// A rate of zero, or beyond any link.
    #[error("a rate of {0} bit/s: give one between 1 kbit/s and 400 Gbit/s")]
    Rate(f64),
    /// A TTL or hop limit past 255.
    #[error("a TTL of {0}: 0-255")]
    Ttl(u32),
}

/// The least an iperf 2 datagram can be: its prefix and the header its client sends.
pub const IPERF2_MIN_BYTES: u64 = 16 + 60;

/// Checks a group (and the source of a source-specific join).
pub fn check_group(group: SocketAddr, source: Option<std::net::IpAddr>) -> Result<(), McSpecError> {
    if !group.ip().is_multicast() {
        return Err(McSpecError::NotAGroup(group.ip()));
    }
    if group.port() == 0 {
        return Err(McSpecError::NoPort);
    }
    if let Some(s) = source {
        if s.is_ipv4() != group.is_ipv4() || s.is_multicast() || s.is_unspecified() {
            return Err(McSpecError::BadSource {
                group: group.ip(),
                sender: s,
            });
        }
    }
    Ok(())
}

/// Checks a sender's datagram size, rate and TTL; `iperf2` when it writes iperf 2's datagrams.
pub fn check_sender(length: u64, rate_bps: f64, ttl: u32, iperf2: bool) -> Result<(), McSpecError> {
    let min = if iperf2 {
        IPERF2_MIN_BYTES
    } else {
        HEADER_BYTES as u64
    };
    let max = crate::udp::MAX_UDP_LENGTH;
    if !(min..=max).contains(&length) {
        return Err(McSpecError::Length {
            got: length,
            min,
            max,
        });
    }
    if !(1e3..=4e11).contains(&rate_bps) {
        return Err(McSpecError::Rate(rate_bps));
    }
    if ttl > 255 {
        return Err(McSpecError::Ttl(ttl));
    }
    Ok(())
}
