//! The UDP server's report: the datagram a server sends back when a UDP test ends (it answers each
//! of the client's negative-numbered datagrams with it), so the client can print what arrived:
//! bytes, the test's length, datagrams lost, out of order and in all, jitter, and with `-e` the
//! one-way transit times and the packet rate. 16 bytes of prefix (zeros from 2.1.8), a version-1
//! part of ten words, an extension of fifteen (times as whole seconds and microseconds), and the
//! upper halves of the three counts.

use crate::udp::PREFIX_BYTES;
use std::time::Duration;

/// The report's size as iperf 2.1.8 sends it.
pub const REPORT_BYTES: usize = PREFIX_BYTES + 4 * (10 + 15 + 3);

/// The transit-time statistics (`-e`): each datagram's arrival less its send time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transit {
    /// The least.
    pub min: Duration,
    /// The most.
    pub max: Duration,
    /// Their sum.
    pub sum: Duration,
    /// Their mean.
    pub mean: Duration,
    /// The sum of squared differences from the mean (Welford's M2), microseconds squared.
    pub m2_us2: f64,
    /// The last change of transit time, microseconds (signed).
    pub last_change_us: i64,
    /// Datagrams timed.
    pub count: u32,
}

/// A UDP server's report.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerReport {
    /// Its flags (`VERSION1 | EXTEND | SEQNO64B` from 2.1.8).
    pub flags: u32,
    /// Bytes received.
    pub bytes: u64,
    /// From the first datagram to the last.
    pub duration: Duration,
    /// Datagrams lost.
    pub lost: u64,
    /// Datagrams out of order.
    pub out_of_order: u64,
    /// Datagrams the test sent (the last sequence number).
    pub datagrams: u64,
    /// Jitter, RFC 1889's smoothed mean deviation.
    pub jitter: Duration,
    /// Transit times.
    pub transit: Transit,
    /// Datagrams counted for the packet rate, and the seconds they took (its `pps`).
    pub rate_count: u32,
    /// The seconds of the packet rate's span.
    pub rate_span_s: u32,
}

/// The `i`th word after the prefix.
fn word(b: &[u8], i: usize) -> u32 {
    crate::be32(b, PREFIX_BYTES + 4 * i)
}

fn time(b: &[u8], i: usize) -> Duration {
    Duration::from_secs(u64::from(word(b, i))) + Duration::from_micros(u64::from(word(b, i + 1)))
}

fn pair(d: Duration) -> [u32; 2] {
    [d.as_secs() as u32, d.subsec_micros()]
}

fn wide(high: u32, low: u32) -> u64 {
    u64::from(high) << 32 | u64::from(low)
}

impl ServerReport {
    /// Reads a report; None when `b` is shorter than one.
    pub fn parse(b: &[u8]) -> Option<ServerReport> {
        if b.len() < REPORT_BYTES {
            return None;
        }
        let w = |i| word(b, i);
        Some(ServerReport {
            flags: w(0),
            bytes: wide(w(1), w(2)),
            duration: time(b, 3),
            lost: wide(w(25), w(5)),
            out_of_order: wide(w(26), w(6)),
            datagrams: wide(w(27), w(7)),
            jitter: time(b, 8),
            transit: Transit {
                min: time(b, 10),
                max: time(b, 12),
                sum: time(b, 14),
                mean: time(b, 16),
                m2_us2: f64::from(w(18)) + f64::from(w(19)) / 1e6,
                last_change_us: i64::from(w(20) as i32) * 1_000_000 + i64::from(w(21) as i32),
                count: w(22),
            },
            rate_count: w(23),
            rate_span_s: w(24),
        })
    }

    /// The report as iperf 2.1.8 writes it (a zero prefix).
    pub fn encode(&self) -> [u8; REPORT_BYTES] {
        let t = &self.transit;
        let m2_whole = t.m2_us2.trunc();
        let change = [
            (t.last_change_us / 1_000_000) as i32 as u32,
            (t.last_change_us % 1_000_000) as i32 as u32,
        ];
        let words: Vec<u32> = [
            vec![self.flags, (self.bytes >> 32) as u32, self.bytes as u32],
            pair(self.duration).to_vec(),
            vec![self.lost as u32, self.out_of_order as u32, self.datagrams as u32],
            pair(self.jitter).to_vec(),
            [t.min, t.max, t.sum, t.mean]
                .iter()
                .flat_map(|d| pair(*d))
                .collect(),
            vec![m2_whole as u32, ((t.m2_us2 - m2_whole) * 1e6).round() as u32],
            change.to_vec(),
            vec![t.count, self.rate_count, self.rate_span_s],
            vec![
                (self.lost >> 32) as u32,
                (self.out_of_order >> 32) as u32,
                (self.datagrams >> 32) as u32,
            ],
        ]
        .concat();
        let mut out = [0u8; REPORT_BYTES];
        for (i, w) in words.iter().enumerate() {
            out[PREFIX_BYTES + 4 * i..PREFIX_BYTES + 4 * i + 4].copy_from_slice(&w.to_be_bytes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reports iperf 2.1.8's server (`iperf -s -u -e`) sent its own client, relayed and kept, with
    /// what that client printed from each.
    const CAPTURES: &[(&str, &str)] = &[
        // iperf -c 127.0.0.1 -u -n 100K -l 1000 -e: "0.0000-0.7783 sec 101 KBytes 1.06 Mbits/sec
        // 0.017 ms 0/104 (0%) 0.122/0.038/0.234/0.045 ms 133 pps"
        ("-n 100K", "00000000000000000000000000000000c800000000000000000193e800000000000be0310000000000000000000000680000000000000011000000000000002600000000000000ea00000000000031af000000000000007a0003280f000b973f00000000ffffffd9000000680000008500000001000000000000000000000000"),
        // iperf -c 127.0.0.1 -u -t 1 -b 400K -l 500 -e: "0.0000-1.0158 sec 51.8 KBytes 417 Kbits/sec
        // 0.024 ms 0/106 (0%) 0.156/0.095/0.275/0.029 ms 104 pps"
        ("-t 1 -b 400K", "00000000000000000000000000000000c8000000000000000000cf080000000100003dc800000000000000000000006a0000000000000018000000000000005f0000000000000113000000000000407e000000000000009b000162ad0001955d00000000ffffffe20000006a0000006800000001000000000000000000000000"),
    ];

    fn bytes(name: &str) -> Vec<u8> {
        crate::unhex(CAPTURES.iter().find(|(n, _)| *n == name).unwrap().1)
    }

    fn us(d: Duration) -> u128 {
        d.as_micros()
    }

    /// The figures the client printed, from the report: transfer, interval, lost/total, jitter,
    /// latency avg/min/max/stdev, pps.
    fn printed(r: &ServerReport) -> (u64, u128, u64, u64, u128, [f64; 4], u32) {
        let t = &r.transit;
        let avg = us(t.sum) as f64 / f64::from(t.count);
        let stdev = (t.m2_us2 / f64::from(t.count - 1)).sqrt();
        let latency =
            [avg, us(t.min) as f64, us(t.max) as f64, stdev].map(|v| (v / 1000.0 * 1e3).round() / 1e3);
        (
            r.bytes,
            us(r.duration),
            r.lost,
            r.datagrams,
            us(r.jitter),
            latency,
            r.rate_count / r.rate_span_s,
        )
    }

    #[test]
    fn a_server_report_reads_as_the_iperf2_client_printed_it_and_writes_back_the_same() {
        let r = ServerReport::parse(&bytes("-n 100K")).unwrap();
        // 101 KBytes (103,400 bytes), 0.7783 s, 0/104, 0.017 ms, 0.122/0.038/0.234/0.045 ms, 133 pps.
        assert_eq!(
            printed(&r),
            (103_400, 778_289, 0, 104, 17, [0.122, 0.038, 0.234, 0.045], 133)
        );
        assert_eq!(r.transit.last_change_us, -39);
        assert_eq!(r.encode().to_vec(), bytes("-n 100K"));
        let r = ServerReport::parse(&bytes("-t 1 -b 400K")).unwrap();
        // 51.8 KBytes, 1.0158 s, 0/106, 0.024 ms, 0.156/0.095/0.275/0.029 ms, 104 pps.
        assert_eq!(
            printed(&r),
            (53_000, 1_015_816, 0, 106, 24, [0.156, 0.095, 0.275, 0.029], 104)
        );
        assert_eq!(r.encode().to_vec(), bytes("-t 1 -b 400K"));
        assert_eq!(ServerReport::parse(&bytes("-n 100K")[..REPORT_BYTES - 1]), None);
    }

    #[test]
    fn counts_beyond_32_bits_keep_their_upper_halves() {
        let mut r = ServerReport::parse(&bytes("-n 100K")).unwrap();
        (r.bytes, r.lost, r.out_of_order, r.datagrams) = (5 << 32 | 7, 3 << 32 | 1, 1 << 33, 9 << 32 | 2);
        assert_eq!(ServerReport::parse(&r.encode()), Some(r));
    }
}
