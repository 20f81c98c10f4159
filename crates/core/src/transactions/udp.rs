//! Request/response over UDP (`run HOST --rr -u`, netperf's UDP_RR), sans-IO. Each request is one
//! datagram to a landspeed server's echo service (`path::echo`: the server copies a request back, at
//! full length or cut to its header), each response the echo of one request; `in_flight` requests
//! are kept unanswered at once. UDP loses datagrams, so a request whose answer has not come within
//! the loss timeout is counted lost and replaced, and an answer that comes later is counted late and
//! not timed. Every full-length answer's padding is compared with its request's. The I/O layer
//! (`net::udp_rr`) hands this machine the clock and the datagrams.

use super::{TransactionLog, TransactionShape, TransactionsReport};
use crate::path::echo::{EchoHeader, EchoKind, ECHO_HEADER_LEN};
use std::collections::BTreeMap;

/// The smallest request: the echo header.
pub const MIN_BYTES: u32 = ECHO_HEADER_LEN as u32;
/// The largest request: a UDP datagram's payload over IPv4.
pub const MAX_BYTES: u32 = 65_507;

/// A UDP request/response test's state.
pub struct UdpRr {
    train: u32,
    request_bytes: usize,
    short_reply: bool,
    in_flight: u32,
    loss_timeout_ns: u64,
    next_seq: u32,
    /// Unanswered requests: their number and when they were sent.
    outstanding: BTreeMap<u32, u64>,
    log: TransactionLog,
    lost: u64,
    late: u64,
    corrupt: u64,
}

/// Why a UDP request/response test cannot be run as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UdpRrError {
    /// A request outside what one datagram with the echo header can be.
    #[error("a UDP request is {MIN_BYTES} (the echo header) to {MAX_BYTES} bytes, not {0}")]
    RequestSize(u32),
    /// A response other than the request's size or the header alone.
    #[error("a UDP response is the request's size or the {MIN_BYTES}-byte header alone, not {0}")]
    ResponseSize(u32),
}

/// What one received datagram was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// The answer to an outstanding request, timed.
    Answer,
    /// The answer to a request already counted lost.
    Late,
    /// Not an answer to this test.
    Other,
}

/// Whether the echo service can carry requests of `req` bytes answered with `resp`.
pub fn check_sizes(req: u32, resp: u32) -> Result<(), UdpRrError> {
    if !(MIN_BYTES..=MAX_BYTES).contains(&req) {
        return Err(UdpRrError::RequestSize(req));
    }
    if resp != req && resp != MIN_BYTES {
        return Err(UdpRrError::ResponseSize(resp));
    }
    Ok(())
}

impl UdpRr {
    /// A test of `shape` (its request and response sizes checked), its requests numbered in series
    /// `train`, each counted lost when unanswered for `loss_timeout_ns`.
    pub fn new(
        shape: TransactionShape,
        train: u32,
        loss_timeout_ns: u64,
        interval_ns: u64,
    ) -> Result<UdpRr, UdpRrError> {
        let (req, resp) = (shape.request_bytes, shape.response_bytes);
        check_sizes(req, resp)?;
        Ok(UdpRr {
            train,
            request_bytes: req as usize,
            short_reply: resp != req,
            in_flight: shape.in_flight.max(1),
            loss_timeout_ns,
            next_seq: 0,
            outstanding: BTreeMap::new(),
            log: TransactionLog::new(shape, interval_ns),
            lost: 0,
            late: 0,
            corrupt: 0,
        })
    }

    /// Bytes of each request (the buffer `request` writes into must hold them).
    pub fn request_bytes(&self) -> usize {
        self.request_bytes
    }

    /// The next request, written into `buf`, when fewer than `in_flight` are unanswered; its length.
    pub fn request(&mut self, buf: &mut [u8], now_ns: u64) -> Option<usize> {
        if self.outstanding.len() >= self.in_flight as usize {
            return None;
        }
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        let n = self.request_bytes;
        EchoHeader::request(self.train, seq, now_ns, self.short_reply).write(&mut buf[..n]);
        fill(&mut buf[ECHO_HEADER_LEN..n], seq);
        self.outstanding.insert(seq, now_ns);
        Some(n)
    }

    /// A datagram received at `now_ns`.
    pub fn on_datagram(&mut self, buf: &[u8], now_ns: u64) -> Heard {
        let Some(h) = EchoHeader::read(buf) else {
            return Heard::Other;
        };
        if h.kind != EchoKind::Reply || h.train != self.train {
            return Heard::Other;
        }
        let Some(sent_ns) = self.outstanding.remove(&h.seq) else {
            if h.seq < self.next_seq {
                self.late += 1;
                return Heard::Late;
            }
            return Heard::Other;
        };
        let expected = if self.short_reply {
            ECHO_HEADER_LEN
        } else {
            self.request_bytes
        };
        if buf.len() != expected || !padding_is(&buf[ECHO_HEADER_LEN..], h.seq) {
            self.corrupt += 1;
        }
        self.log.record(now_ns, now_ns.saturating_sub(sent_ns));
        Heard::Answer
    }

    /// Counts lost every request unanswered for the loss timeout at `now_ns`; how many.
    pub fn expire(&mut self, now_ns: u64) -> u64 {
        let old: Vec<u32> = self
            .outstanding
            .iter()
            .filter(|(_, &sent)| now_ns.saturating_sub(sent) >= self.loss_timeout_ns)
            .map(|(&seq, _)| seq)
            .collect();
        for seq in &old {
            self.outstanding.remove(seq);
        }
        self.lost += old.len() as u64;
        self.log.advance(now_ns);
        old.len() as u64
    }

    /// When the oldest unanswered request will be counted lost.
    pub fn next_expiry_ns(&self) -> Option<u64> {
        self.outstanding.values().min().map(|s| s + self.loss_timeout_ns)
    }

    /// Intervals closed so far.
    pub fn log(&mut self) -> &mut TransactionLog {
        &mut self.log
    }

    /// Answers whose bytes were not their request's.
    pub fn corrupt(&self) -> u64 {
        self.corrupt
    }

    /// The report at the end (`end_ns` after the start): requests still unanswered then are
    /// neither answered nor lost (the test ended first).
    pub fn finish(self, end_ns: u64) -> TransactionsReport {
        let mut r = self.log.finish(end_ns);
        r.lost = Some(self.lost);
        r.late = Some(self.late);
        r
    }
}

/// Several sockets' tests run at once as one (`-P`): every socket's figures together
/// (`transactions::pooled`, each socket's own report in `connections`), with each one's losses and
/// late answers, and the test's summed.
pub fn pooled(rrs: Vec<UdpRr>, end_ns: u64) -> TransactionsReport {
    let counts: Vec<(u64, u64)> = rrs.iter().map(|r| (r.lost, r.late)).collect();
    let mut report = super::pooled(rrs.into_iter().map(|r| r.log).collect(), end_ns);
    for (c, (lost, late)) in report.connections.iter_mut().zip(&counts) {
        c.lost = Some(*lost);
        c.late = Some(*late);
    }
    report.lost = Some(counts.iter().map(|c| c.0).sum());
    report.late = Some(counts.iter().map(|c| c.1).sum());
    report
}

/// A request's padding: a pattern of its number, so an answer to another request, or bytes changed
/// on the way, do not match.
fn fill(pad: &mut [u8], seq: u32) {
    for (i, b) in pad.iter_mut().enumerate() {
        *b = (seq as usize).wrapping_mul(31).wrapping_add(i) as u8;
    }
}

fn padding_is(pad: &[u8], seq: u32) -> bool {
    pad.iter()
        .enumerate()
        .all(|(i, &b)| b == (seq as usize).wrapping_mul(31).wrapping_add(i) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::echo::answer;

    fn shape(req: u32, resp: u32, in_flight: u32) -> TransactionShape {
        TransactionShape {
            kind: "landspeed UDP echo (UDP_RR)".into(),
            request_bytes: req,
            response_bytes: resp,
            in_flight,
            ..TransactionShape::default()
        }
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn each_answer_is_timed_and_checked_and_the_window_holds_in_flight() {
        let mut rr = UdpRr::new(shape(100, 100, 2), 7, 1000 * MS, 0).unwrap();
        let mut a = vec![0u8; 100];
        let mut b = vec![0u8; 100];
        assert_eq!(rr.request(&mut a, 0), Some(100));
        assert_eq!(rr.request(&mut b, MS), Some(100));
        assert_eq!(rr.request(&mut [0u8; 100], MS), None, "two in flight");
        // The server's echo, answered out of order; b's answer has a changed byte.
        answer(&mut b, 5).unwrap();
        b[60] ^= 1;
        assert_eq!(rr.on_datagram(&b, 3 * MS), Heard::Answer);
        answer(&mut a, 5).unwrap();
        assert_eq!(rr.on_datagram(&a, 4 * MS), Heard::Answer);
        assert_eq!(rr.on_datagram(&a, 5 * MS), Heard::Late, "an answer twice");
        assert_eq!(rr.corrupt(), 1);
        let r = rr.finish(10 * MS);
        assert_eq!((r.transactions, r.lost, r.late), (2, Some(0), Some(1)));
        assert_eq!(r.latency.min_ms, Some(2.0));
        assert_eq!(r.latency.max_ms, Some(4.0));
    }

    #[test]
    fn an_unanswered_request_is_lost_at_the_timeout_and_its_late_answer_not_timed() {
        let mut rr = UdpRr::new(shape(32, 32, 1), 1, 100 * MS, 0).unwrap();
        let mut a = vec![0u8; 32];
        rr.request(&mut a, 0).unwrap();
        assert_eq!(rr.next_expiry_ns(), Some(100 * MS));
        assert_eq!(rr.expire(99 * MS), 0);
        assert_eq!(rr.expire(100 * MS), 1);
        assert!(rr.request(&mut [0u8; 32], 100 * MS).is_some(), "replaced");
        answer(&mut a, 0).unwrap();
        assert_eq!(rr.on_datagram(&a, 150 * MS), Heard::Late);
        // Someone else's echo, or not an echo at all.
        let mut other = vec![0u8; 32];
        EchoHeader::request(2, 1, 0, false).write(&mut other);
        answer(&mut other, 0).unwrap();
        assert_eq!(rr.on_datagram(&other, 150 * MS), Heard::Other);
        assert_eq!(rr.on_datagram(b"hello", 150 * MS), Heard::Other);
        let r = rr.finish(200 * MS);
        assert_eq!((r.transactions, r.lost, r.late), (0, Some(1), Some(1)));
    }

    #[test]
    fn sockets_run_at_once_are_one_test_with_each_ones_losses() {
        // One socket answered twice, another once and one request lost.
        let mut one = UdpRr::new(shape(32, 32, 1), 1, 100 * MS, 0).unwrap();
        for k in 0..2u64 {
            let mut a = vec![0u8; 32];
            one.request(&mut a, k * 10 * MS).unwrap();
            answer(&mut a, 0).unwrap();
            assert_eq!(one.on_datagram(&a, k * 10 * MS + 2 * MS), Heard::Answer);
        }
        let mut two = UdpRr::new(shape(32, 32, 1), 2, 100 * MS, 0).unwrap();
        let mut b = vec![0u8; 32];
        two.request(&mut b, 0).unwrap();
        answer(&mut b, 0).unwrap();
        assert_eq!(two.on_datagram(&b, 4 * MS), Heard::Answer);
        two.request(&mut [0u8; 32], 5 * MS).unwrap();
        assert_eq!(two.expire(105 * MS), 1);
        let r = pooled(vec![one, two], 200 * MS);
        assert_eq!((r.transactions, r.lost, r.late), (3, Some(1), Some(0)));
        assert_eq!((r.latency.min_ms, r.latency.max_ms), (Some(2.0), Some(4.0)));
        let each: Vec<_> = (r.connections.iter()).map(|c| (c.transactions, c.lost)).collect();
        assert_eq!(each, [(2, Some(0)), (1, Some(1))]);
    }

    #[test]
    fn a_short_reply_is_the_header_and_sizes_outside_an_echo_are_refused() {
        let mut rr = UdpRr::new(shape(1000, 32, 1), 3, 100 * MS, 0).unwrap();
        let mut a = vec![0u8; 1000];
        rr.request(&mut a, 0).unwrap();
        let n = answer(&mut a, 0).unwrap();
        assert_eq!(n, 32);
        assert_eq!(rr.on_datagram(&a[..n], MS), Heard::Answer);
        assert_eq!(rr.corrupt(), 0);
        assert_eq!(
            UdpRr::new(shape(31, 31, 1), 0, 1, 0).err(),
            Some(UdpRrError::RequestSize(31))
        );
        assert_eq!(
            UdpRr::new(shape(70_000, 32, 1), 0, 1, 0).err(),
            Some(UdpRrError::RequestSize(70_000))
        );
        assert_eq!(
            UdpRr::new(shape(100, 50, 1), 0, 1, 0).err(),
            Some(UdpRrError::ResponseSize(50))
        );
    }
}
