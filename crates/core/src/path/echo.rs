//! The UDP echo probe. A landspeed server's UDP port answers any datagram that starts with `ECHO_MAGIC`
//! (after `--allow`): it copies the probe back with the kind set to reply and its own receive time
//! filled in, either at full length (RTT probes, so both directions carry the probe's size) or cut to
//! the header (path-MTU probes and packet trains, so the reverse path never limits what is measured).
//! A reply is never longer than its probe, so the echo cannot amplify traffic.
//!
//! Layout, big-endian: magic `LSPE` (4) | kind u8 | flags u8 | reserved u16 | train u32 | seq u32 |
//! client send time ns u64 | server receive time ns u64 | padding.

/// The first four bytes of every echo datagram.
pub const ECHO_MAGIC: [u8; 4] = *b"LSPE";
/// Bytes before the padding.
pub const ECHO_HEADER_LEN: usize = 32;
/// Flag: the server answers with the header only.
pub const FLAG_SHORT_REPLY: u8 = 1;

/// Which way an echo datagram goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EchoKind {
    /// From the client: answer me.
    Request,
    /// The server's answer.
    Reply,
}

/// The header of an echo datagram (docs/path.md has the layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchoHeader {
    /// Request or reply.
    pub kind: EchoKind,
    /// Flags (`FLAG_SHORT_REPLY`).
    pub flags: u8,
    /// Which probe series (a packet train, or one RTT run) this belongs to.
    pub train: u32,
    /// The probe's number in its series.
    pub seq: u32,
    /// The client's clock when it sent the probe.
    pub sent_ns: u64,
    /// The server's clock when the probe arrived (0 in requests).
    pub server_rx_ns: u64,
}

impl EchoHeader {
    /// A request.
    pub fn request(train: u32, seq: u32, sent_ns: u64, short_reply: bool) -> Self {
        EchoHeader {
            kind: EchoKind::Request,
            flags: if short_reply { FLAG_SHORT_REPLY } else { 0 },
            train,
            seq,
            sent_ns,
            server_rx_ns: 0,
        }
    }

    /// Writes the header into the start of `buf` (at least `ECHO_HEADER_LEN` bytes).
    pub fn write(&self, buf: &mut [u8]) {
        buf[..4].copy_from_slice(&ECHO_MAGIC);
        buf[4] = match self.kind {
            EchoKind::Request => 0,
            EchoKind::Reply => 1,
        };
        buf[5] = self.flags;
        buf[6..8].copy_from_slice(&[0, 0]);
        buf[8..12].copy_from_slice(&self.train.to_be_bytes());
        buf[12..16].copy_from_slice(&self.seq.to_be_bytes());
        buf[16..24].copy_from_slice(&self.sent_ns.to_be_bytes());
        buf[24..32].copy_from_slice(&self.server_rx_ns.to_be_bytes());
    }

    /// Parses a datagram; None when it is not an echo datagram.
    pub fn read(buf: &[u8]) -> Option<EchoHeader> {
        if buf.len() < ECHO_HEADER_LEN || buf[..4] != ECHO_MAGIC {
            return None;
        }
        let kind = match buf[4] {
            0 => EchoKind::Request,
            1 => EchoKind::Reply,
            _ => return None,
        };
        let u32_at = |i: usize| u32::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&buf[i..i + 8]);
            u64::from_be_bytes(b)
        };
        Some(EchoHeader {
            kind,
            flags: buf[5],
            train: u32_at(8),
            seq: u32_at(12),
            sent_ns: u64_at(16),
            server_rx_ns: u64_at(24),
        })
    }

    /// The sender asked for a header-only reply.
    pub fn short_reply(&self) -> bool {
        self.flags & FLAG_SHORT_REPLY != 0
    }
}

/// The server's answer to a request datagram `buf` received at `rx_ns`: how many bytes of `buf` to send
/// back after the call rewrote its header in place; None when `buf` is not a request.
pub fn answer(buf: &mut [u8], rx_ns: u64) -> Option<usize> {
    let h = EchoHeader::read(buf)?;
    if h.kind != EchoKind::Request {
        return None;
    }
    let len = if h.short_reply() {
        ECHO_HEADER_LEN
    } else {
        buf.len()
    };
    EchoHeader {
        kind: EchoKind::Reply,
        server_rx_ns: rx_ns,
        ..h
    }
    .write(buf);
    Some(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_answer() {
        let mut buf = vec![0xaa; 1400];
        let h = EchoHeader::request(3, 9, 123_456_789, false);
        h.write(&mut buf);
        assert_eq!(EchoHeader::read(&buf), Some(h));
        assert_eq!(answer(&mut buf, 77), Some(1400));
        let r = EchoHeader::read(&buf).unwrap();
        assert_eq!(
            (r.kind, r.train, r.seq, r.sent_ns, r.server_rx_ns),
            (EchoKind::Reply, 3, 9, 123_456_789, 77)
        );
        assert!(
            buf[ECHO_HEADER_LEN..].iter().all(|&b| b == 0xaa),
            "padding is echoed untouched"
        );
        // A reply is not answered again (no ping-pong between two servers).
        assert_eq!(answer(&mut buf, 78), None);
        let mut short = vec![0; 9000];
        EchoHeader::request(1, 1, 1, true).write(&mut short);
        assert_eq!(answer(&mut short, 5), Some(ECHO_HEADER_LEN));
    }

    #[test]
    fn other_datagrams_are_not_echoes() {
        assert_eq!(EchoHeader::read(b"LSPD"), None);
        assert_eq!(EchoHeader::read(&[0u8; 64]), None);
        let mut b = [0u8; 40];
        EchoHeader::request(0, 0, 0, false).write(&mut b);
        b[4] = 7;
        assert_eq!(EchoHeader::read(&b), None);
        assert_eq!(answer(&mut b[..10], 0), None);
    }
}
