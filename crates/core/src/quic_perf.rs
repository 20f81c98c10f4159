//! The QUIC performance protocol's requests (draft-banks-quic-performance), without I/O: a stream's
//! bytes are pushed as they arrive and, at its FIN, the decoder says what the server must send back.
//! A request starts with the response size as an 8-byte big-endian integer (u64::MAX: "until the
//! client stops the stream"), then carries the upload; a stream that ends before its 8 bytes is no
//! request and is ignored. Also here: which datagrams on the server's shared UDP port belong to QUIC
//! (the rule the port's BPF router applies in the kernel). The fuzz target `perf_request` feeds both
//! hostile bytes.

/// What a request asks the server to send back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Response {
    /// Exactly this many bytes, then FIN.
    Bytes(u64),
    /// Bytes until the client stops the stream (the size was u64::MAX).
    UntilStopped,
}

/// The size header a client sends: `None` asks for bytes until it stops the stream.
pub fn request_header(size: Option<u64>) -> [u8; 8] {
    size.unwrap_or(u64::MAX).to_be_bytes()
}

/// One request stream's bytes as they arrive.
#[derive(Debug, Default, Clone)]
pub struct RequestDecoder {
    head: [u8; 8],
    have: usize,
    uploaded: u64,
}

impl RequestDecoder {
    /// A stream with nothing received yet.
    pub fn new() -> RequestDecoder {
        RequestDecoder::default()
    }

    /// Takes the next bytes of the stream: the header first, the rest counted as upload.
    pub fn push(&mut self, data: &[u8]) {
        let take = (8 - self.have).min(data.len());
        self.head[self.have..self.have + take].copy_from_slice(&data[..take]);
        self.have += take;
        self.uploaded += (data.len() - take) as u64;
    }

    /// Upload bytes received so far (the header not included).
    pub fn uploaded(&self) -> u64 {
        self.uploaded
    }

    /// At the stream's FIN: the response it asked for, or None when it ended before its header.
    pub fn finish(&self) -> Option<Response> {
        (self.have == 8).then(|| match u64::from_be_bytes(self.head) {
            u64::MAX => Response::UntilStopped,
            n => Response::Bytes(n),
        })
    }
}

/// The first four bytes of landspeed's own datagrams on its UDP port: echo probes and stream hellos.
pub const LANDSPEED_DATAGRAMS: [[u8; 4]; 2] = [*b"LSPE", *b"LSPD"];

/// QUIC's fixed bit in the first byte of every packet (RFC 9000 section 17; landspeed does not grease it).
pub const QUIC_FIXED_BIT: u8 = 0x40;

/// First bytes from this one up are no QUIC client's: a long header's type 3 (Retry) is sent by
/// servers only, and every other type masks the low bits but keeps these four. iperf 2's UDP end (a
/// negative sequence number, big-endian: `0xFF...` below 2^24 datagrams) starts with them.
pub const NOT_FROM_QUIC_CLIENTS: u8 = 0xF0;

/// Whether a datagram arriving on the server's shared UDP port goes to the QUIC endpoint: not one of
/// landspeed's own, four bytes at least, QUIC's fixed bit set (iperf3's `6789` hello and iperf 2's
/// datagrams lack it) and no Retry's first byte (iperf 2's end has it).
pub fn is_for_quic(datagram: &[u8]) -> bool {
    match datagram {
        [a, b, c, d, ..] => {
            !LANDSPEED_DATAGRAMS.contains(&[*a, *b, *c, *d])
                && a & QUIC_FIXED_BIT != 0
                && *a < NOT_FROM_QUIC_CLIENTS
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_in_pieces_gives_its_size_and_counts_its_upload() {
        let mut d = RequestDecoder::new();
        let mut bytes = request_header(Some(1_000_000)).to_vec();
        bytes.extend([7u8; 100]);
        for c in bytes.chunks(3) {
            d.push(c);
        }
        assert_eq!(d.finish(), Some(Response::Bytes(1_000_000)));
        assert_eq!(d.uploaded(), 100);
        let mut d = RequestDecoder::new();
        d.push(&request_header(None));
        assert_eq!(d.finish(), Some(Response::UntilStopped));
        let mut d = RequestDecoder::new();
        d.push(&[0; 7]);
        assert_eq!(d.finish(), None);
    }

    #[test]
    fn the_shared_port_routes_by_first_bytes() {
        assert!(!is_for_quic(b"LSPE...."));
        assert!(!is_for_quic(b"LSPDxxxx"));
        assert!(!is_for_quic(b"6789"));
        assert!(!is_for_quic(&[0xc0, 1, 2]));
        assert!(is_for_quic(&[0xc0, 0, 0, 0, 1]));
        assert!(is_for_quic(&[0x41, 9, 9, 9]));
        assert!(!is_for_quic(&[0x01, 9, 9, 9]));
        // iperf 2's end of a UDP test (its sequence negated) and any Retry-typed first byte.
        assert!(!is_for_quic(&[0xff, 0xff, 0xff, 0x34, 0x6b]));
        assert!(!is_for_quic(&[0xf0, 0, 0, 0, 1]));
        assert!(is_for_quic(&[0xef, 0, 0, 0, 1]));
    }
}
