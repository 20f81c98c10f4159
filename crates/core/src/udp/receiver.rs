//! The receiver's accounting of one UDP stream: unique datagrams and bytes, out-of-order arrivals,
//! duplicates (a bitmap over the last 65,536 sequence numbers), and interarrival jitter as RFC 3550
//! defines it (J += (|D| − J) / 16, D the difference of consecutive transit times). Loss is counted at the
//! end against what the sender says it sent, which landspeed's protocol reports; only when that is not
//! known (iperf3 peers) is it estimated from the highest sequence number seen.
//!
//! Where the loss happened: the kernel stamps each buffer it queues on the socket with the count of
//! buffers the socket has dropped so far (SO_RXQ_OVFL). A gap in the sequence numbers before a buffer
//! whose count went up was dropped by this host's full socket buffer; the other gaps happened before
//! the datagrams reached it (on the path, or in the sending host after `send` took them). One dropped
//! buffer may hold many datagrams (segmentation and receive offload), so gaps, not drop counts, are
//! what is summed.

use super::Header;

const WINDOW: u64 = 1 << 16;

/// A UDP receiver's accounting: unique datagrams, loss from sequence numbers, order, duplicates and jitter.
#[derive(Debug, Clone)]
pub struct UdpReceiver {
    received: u64,
    bytes: u64,
    max_seq: Option<u64>,
    out_of_order: u64,
    duplicates: u64,
    /// Datagrams older than the duplicate window: counted as received, cannot be checked for repeats.
    too_old: u64,
    seen: Vec<u64>,
    jitter_ns: f64,
    last_transit: Option<i128>,
    /// The socket's drop count with the last buffer, and whether it rose before the next datagram.
    drops_seen: Option<u64>,
    drop_pending: bool,
    lost_in_host: u64,
}

/// A stream's UDP figures at the end of a test.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UdpStats {
    /// Datagrams the sender sent (when known) and the receiver got (unique).
    pub datagrams_sent: Option<u64>,
    /// Unique datagrams that arrived.
    pub datagrams_received: u64,
    /// Datagrams that did not.
    pub datagrams_lost: u64,
    /// Lost ÷ expected, percent.
    pub loss_pct: f64,
    /// Datagrams that arrived after a later one.
    pub out_of_order: u64,
    /// Datagrams that arrived twice or more.
    pub duplicates: u64,
    /// RFC 3550 interarrival jitter at the end of the test, milliseconds.
    pub jitter_ms: f64,
    /// Buffers the receiving socket dropped because it was full (its kernel counter; one buffer may
    /// hold several datagrams). None where it is not known (iperf3 peers, an older landspeed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_drops: Option<u64>,
    /// Of the datagrams lost, those lost in the receiving host (the gaps that came with a socket drop);
    /// the rest were lost before they reached it. None where the drops are not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_in_receiver: Option<u64>,
    /// Of the datagrams lost, those the sending host dropped after a send that succeeded (its
    /// Udp.SndbufErrors, which count a full queue or device, beyond the send errors landspeed saw,
    /// plus the interface's transmit drops; host-wide counters, capped by the loss not already put in
    /// the receiver). None where the sender's counters are not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_in_sender: Option<u64>,
    /// Datagrams that arrived marked Congestion Experienced (ECN field 11: a queue on the path
    /// signalled instead of dropping; only ECN-capable datagrams can be, e.g. sent with --tos 2).
    /// None where the receiver could not read the ECN field (Windows, iperf3 peers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ce_marked: Option<u64>,
    /// One-way transit over the test and the datagrams' pace, where the receiver read the
    /// sender's send times (iperf 2's datagrams; the clocks' offset included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transit: Option<TransitSummary>,
}

/// One-way transit over a set of datagrams (each one's arrival less its send time, so the two
/// hosts' clock offset is in it) and their pace, as iperf 2's `-e` receiver prints them.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TransitSummary {
    /// Datagrams counted.
    pub datagrams: u64,
    /// The transits' mean, ms.
    pub mean_ms: f64,
    /// Least, ms.
    pub min_ms: f64,
    /// Most, ms.
    pub max_ms: f64,
    /// Standard deviation (n − 1), ms.
    pub stddev_ms: f64,
    /// The datagrams over the sum of their arrival gaps, a second (iperf 2's PPS).
    pub per_s: f64,
}

impl Default for UdpReceiver {
    fn default() -> Self {
        UdpReceiver {
            received: 0,
            bytes: 0,
            max_seq: None,
            out_of_order: 0,
            duplicates: 0,
            too_old: 0,
            seen: vec![0; (WINDOW / 64) as usize],
            jitter_ns: 0.0,
            last_transit: None,
            drops_seen: None,
            drop_pending: false,
            lost_in_host: 0,
        }
    }
}

impl UdpReceiver {
    fn bit(&mut self, seq: u64) -> (usize, u64) {
        let i = seq % WINDOW;
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    /// The socket's drop count the kernel stamped on the buffer whose datagrams come next (0 when it
    /// stamped none); call it before their `on_datagram`s.
    pub fn on_socket_drops(&mut self, total: u64) {
        self.drop_pending |= total > self.drops_seen.unwrap_or(0);
        self.drops_seen = Some(self.drops_seen.unwrap_or(0).max(total));
    }

    /// Accounts one datagram of `len` bytes. Returns false for a duplicate (whose bytes must not be
    /// counted or verified again).
    pub fn on_datagram(&mut self, h: Header, arrival_ns: u64, len: usize) -> bool {
        match self.max_seq {
            Some(max) if h.seq <= max => {
                if max - h.seq >= WINDOW {
                    self.too_old += 1;
                } else {
                    let (w, m) = self.bit(h.seq);
                    if self.seen[w] & m != 0 {
                        self.duplicates += 1;
                        return false;
                    }
                    self.seen[w] |= m;
                }
                self.out_of_order += 1;
            }
            _ => {
                // Clear the bits of the sequence numbers skipped over (at most the whole window).
                let from = self.max_seq.map_or(0, |m| m + 1);
                if std::mem::take(&mut self.drop_pending) {
                    self.lost_in_host += h.seq - from; // the gap before the first buffer after a drop
                }
                for s in from.max(h.seq.saturating_sub(WINDOW - 1))..h.seq {
                    let (w, m) = self.bit(s);
                    self.seen[w] &= !m;
                }
                let (w, m) = self.bit(h.seq);
                self.seen[w] |= m;
                self.max_seq = Some(h.seq);
            }
        }
        self.received += 1;
        self.bytes += len as u64;
        let transit = i128::from(arrival_ns) - i128::from(h.sent_ns);
        if let Some(prev) = self.last_transit {
            let d = (transit - prev).unsigned_abs() as f64;
            self.jitter_ns += (d - self.jitter_ns) / 16.0;
        }
        self.last_transit = Some(transit);
        true
    }

    /// Bytes received (unique datagrams).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Datagrams the highest sequence number seen says were sent: it, plus one.
    pub fn expected(&self) -> u64 {
        self.max_seq.map_or(0, |m| m + 1)
    }

    /// Distinct datagrams received.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The figures, given how many datagrams the sender sent if it said so.
    pub fn stats(&self, sent: Option<u64>) -> UdpStats {
        let expected = sent.unwrap_or_else(|| self.max_seq.map_or(0, |m| m + 1));
        let lost = expected.saturating_sub(self.received);
        // Drops after the last buffer read (the socket's final count, given last) took the tail.
        let next = self.max_seq.map_or(0, |m| m + 1);
        let tail = if self.drop_pending {
            expected.saturating_sub(next)
        } else {
            0
        };
        UdpStats {
            datagrams_sent: sent,
            datagrams_received: self.received,
            datagrams_lost: lost,
            loss_pct: if expected > 0 {
                lost as f64 * 100.0 / expected as f64
            } else {
                0.0
            },
            out_of_order: self.out_of_order,
            duplicates: self.duplicates,
            jitter_ms: self.jitter_ns / 1e6,
            socket_drops: None,
            lost_in_receiver: self.drops_seen.map(|_| (self.lost_in_host + tail).min(lost)),
            lost_in_sender: None,
            ce_marked: None,
            transit: None,
        }
    }
}

#[cfg(test)]
mod tests;
