//! The client's WebSocket frames, read in pieces of at most `CHUNK` bytes. tungstenite's frame
//! codec holds a whole frame in memory before it hands it over, and a client may send frames of up
//! to ndt7's 16 MiB ceiling, text or binary, as fast as it likes: 32 such uploads held half a GiB
//! outside any budget. Here a frame's payload is taken as it arrives: binary bytes are counted (and
//! unmasked and checked when the client named its payload key), text is counted and kept only when
//! its whole message is small enough to be a measurement (`MAX_TEXT`), control frames (at most 125
//! bytes by RFC 6455) are put together. So a connection costs one `CHUNK` buffer and one small
//! message whatever the client sends, and every byte it sends is counted against the server's
//! limits. The rules of RFC 6455 a counting receiver needs are checked here: client frames masked,
//! no reserved bits, control frames whole and short, data frames in order, no frame over the spec's
//! ceiling.

use super::progress::Progress;
use landspeed_core::ndt7;
use std::io::{ErrorKind, Read};

/// The most bytes read from the connection at once (and the reader's whole buffer).
pub(super) const CHUNK: usize = 64 * 1024;
/// The largest text message kept (as a client measurement): real ones are under 2 KiB.
pub(super) const MAX_TEXT: usize = 4096;
/// The largest frame a client may send: ndt7's message ceiling and room for its header.
const MAX_FRAME: u64 = ndt7::MAX_MESSAGE_BYTES as u64 + 1024;

/// The kind of the message whose fragments are arriving.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Kind {
    Binary,
    Text,
}

/// What the reader found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Got {
    /// Data counted, or nothing yet (the read timed out): keep reading.
    More,
    /// A ping with its payload, to be answered with a pong.
    Ping(Vec<u8>),
    /// The client's close.
    Close,
}

/// What the payload of the frame being read is for.
#[derive(Debug)]
enum Body {
    Binary,
    /// Text: kept while its message stays within `MAX_TEXT` (None once over it).
    Text(Option<Vec<u8>>),
    Control(u8, Vec<u8>),
}

/// The frame being read: its payload left, its mask and where in it the next byte is.
#[derive(Debug)]
struct Payload {
    left: u64,
    mask: [u8; 4],
    phase: usize,
    fin: bool,
    body: Body,
}

/// A client's frames, read piece by piece.
pub(super) struct Reader {
    buf: Vec<u8>,
    /// Unread bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    frame: Option<Payload>,
    /// The message whose fragments are arriving, and (for text) what is kept of it so far.
    inside: Option<Kind>,
    text: Option<Vec<u8>>,
    scratch: Vec<u8>,
}

impl Reader {
    /// A reader that starts with `rest`, the bytes read past the HTTP request (at most a request
    /// head's worth).
    pub(super) fn new(rest: Vec<u8>) -> Reader {
        let mut buf = rest;
        let end = buf.len();
        buf.resize(end.max(CHUNK), 0);
        Reader {
            buf,
            start: 0,
            end,
            frame: None,
            inside: None,
            text: None,
            scratch: Vec::new(),
        }
    }

    /// Takes what is buffered, reading once from `from` when nothing is: what it found. Err(None)
    /// when the connection ended, Err(Some) when the client broke the protocol or the read failed.
    pub(super) fn next(&mut self, from: &mut dyn Read, p: &mut Progress) -> Result<Got, Option<String>> {
        if self.start == self.end || !self.complete_enough() {
            self.fill(from)?;
        }
        loop {
            match self.frame.take() {
                None => {
                    let Some(f) = self.header()? else {
                        return Ok(Got::More);
                    };
                    self.frame = Some(f);
                }
                Some(mut f) => {
                    let n = (self.end - self.start).min(usize::try_from(f.left).unwrap_or(usize::MAX));
                    if n == 0 && f.left > 0 {
                        self.frame = Some(f);
                        return Ok(Got::More);
                    }
                    self.payload(&mut f, n, p);
                    if f.left > 0 {
                        self.frame = Some(f);
                        return Ok(Got::More);
                    }
                    if let Some(got) = self.finish(f, p) {
                        return Ok(got);
                    }
                }
            }
        }
    }

    /// Whether the buffered bytes hold more than a part of a header (else a read is needed first).
    fn complete_enough(&self) -> bool {
        self.frame.is_some()
            || header_len(&self.buf[self.start..self.end]).is_some_and(|n| n <= self.end - self.start)
    }

    /// Reads once into the buffer's free room (unread bytes moved to its front first).
    fn fill(&mut self, from: &mut dyn Read) -> Result<(), Option<String>> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        match from.read(&mut self.buf[self.end..]) {
            Ok(0) => Err(None),
            Ok(n) => {
                self.end += n;
                Ok(())
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(Some(e.to_string())),
        }
    }

    /// Parses a frame's header when it is all buffered, checking it.
    fn header(&mut self) -> Result<Option<Payload>, Option<String>> {
        let b = &self.buf[self.start..self.end];
        let Some(len) = header_len(b).filter(|n| *n <= b.len()) else {
            return Ok(None);
        };
        let (fin, rsv, opcode, masked) = (b[0] & 0x80 != 0, b[0] & 0x70, b[0] & 0x0f, b[1] & 0x80 != 0);
        let size = match b[1] & 0x7f {
            126 => u64::from(u16::from_be_bytes([b[2], b[3]])),
            127 => u64::from_be_bytes(b[2..10].try_into().unwrap_or_default()),
            n => u64::from(n),
        };
        let bad = |why: &str| Err(Some(why.to_string()));
        if !masked {
            return bad("a client frame without a mask");
        }
        let mask: [u8; 4] = b[len - 4..len].try_into().unwrap_or_default();
        self.start += len;
        if rsv != 0 {
            return bad("reserved bits set with no extension agreed");
        }
        if size > MAX_FRAME {
            return bad("a frame over ndt7's 16 MiB ceiling");
        }
        let body = if opcode >= 8 {
            if !fin || size > 125 {
                return bad("a control frame fragmented or over 125 bytes");
            }
            if opcode > 10 {
                return Err(Some(format!("reserved control opcode {opcode}")));
            }
            Body::Control(opcode, Vec::with_capacity(size as usize))
        } else {
            match order(&mut self.inside, opcode, fin).map_err(Some)? {
                Kind::Binary => Body::Binary,
                Kind::Text => {
                    // A new text message starts kept; a fragment carries on with what its message kept.
                    let kept = if opcode == 1 {
                        Some(Vec::new())
                    } else {
                        self.text.take()
                    };
                    Body::Text(kept)
                }
            }
        };
        Ok(Some(Payload {
            left: size,
            mask,
            phase: 0,
            fin,
            body,
        }))
    }

    /// Takes the next `n` payload bytes of frame `f`: every one counted, binary ones checked when
    /// the client named its key, text kept while its message is small.
    fn payload(&mut self, f: &mut Payload, n: usize, p: &mut Progress) {
        let data = &self.buf[self.start..self.start + n];
        match &mut f.body {
            Body::Binary if p.check.is_some() => {
                unmask(data, f.mask, f.phase, &mut self.scratch);
                p.received(&self.scratch);
            }
            Body::Binary => p.moved(p.bytes + n as u64),
            Body::Text(kept) => {
                p.other += n as u64;
                if kept.as_ref().is_some_and(|k| k.len() + n > MAX_TEXT) {
                    *kept = None;
                }
                if let Some(k) = kept {
                    unmask(data, f.mask, f.phase, &mut self.scratch);
                    k.extend_from_slice(&self.scratch);
                }
            }
            Body::Control(_, kept) => {
                p.other += n as u64;
                unmask(data, f.mask, f.phase, &mut self.scratch);
                kept.extend_from_slice(&self.scratch);
            }
        }
        self.start += n;
        f.left -= n as u64;
        f.phase = (f.phase + n) % 4;
    }

    /// A frame read whole: what it means (None: nothing to answer, read on).
    fn finish(&mut self, f: Payload, p: &mut Progress) -> Option<Got> {
        match f.body {
            Body::Binary => None,
            Body::Text(kept) if f.fin => {
                if let Some(text) = kept {
                    p.seen.client_said(&text);
                }
                None
            }
            Body::Text(kept) => {
                self.text = kept;
                None
            }
            Body::Control(8, _) => Some(Got::Close),
            Body::Control(9, payload) => Some(Got::Ping(payload)),
            Body::Control(..) => None,
        }
    }
}

/// A header's length (2 to 14 bytes) once its first two bytes are in `b`.
fn header_len(b: &[u8]) -> Option<usize> {
    let second = *b.get(1)?;
    let ext = match second & 0x7f {
        126 => 2,
        127 => 8,
        _ => 0,
    };
    Some(2 + ext + if second & 0x80 != 0 { 4 } else { 0 })
}

/// Where a data frame with `opcode` leaves the message it belongs to; `inside` is the message in
/// progress.
fn order(inside: &mut Option<Kind>, opcode: u8, fin: bool) -> Result<Kind, String> {
    let kind = match (opcode, *inside) {
        (0, Some(k)) => k,
        (0, None) => return Err("a continuation frame outside a message".into()),
        (_, Some(_)) => return Err("a new message inside a fragmented one".into()),
        (2, None) => Kind::Binary,
        (1, None) => Kind::Text,
        (n, None) => return Err(format!("reserved data opcode {n}")),
    };
    *inside = (!fin).then_some(kind);
    Ok(kind)
}

/// `data` with the client's mask removed, into `out`, `data` starting `phase` bytes into its
/// frame's payload: a copy, then the XOR eight bytes at a time, which the compiler turns into
/// vector instructions.
fn unmask(data: &[u8], mask: [u8; 4], phase: usize, out: &mut Vec<u8>) {
    let m: [u8; 4] = std::array::from_fn(|i| mask[(i + phase) % 4]);
    out.clear();
    out.extend_from_slice(data);
    let wide = u64::from_ne_bytes([m[0], m[1], m[2], m[3], m[0], m[1], m[2], m[3]]);
    let mut chunks = out.chunks_exact_mut(8);
    for c in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(c);
        c.copy_from_slice(&(u64::from_ne_bytes(word) ^ wide).to_ne_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= m[i & 3];
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::progress;
    use super::*;
    use proptest::prelude::*;

    /// A client frame with `opcode`, masked with `mask`.
    fn client_frame(opcode: u8, fin: bool, mask: [u8; 4], payload: &[u8]) -> Vec<u8> {
        let mut f = vec![(if fin { 0x80 } else { 0 }) | opcode];
        match payload.len() {
            n if n < 126 => f.push(0x80 | n as u8),
            n if n < 65536 => {
                f.push(0x80 | 126);
                f.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                f.push(0x80 | 127);
                f.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        f.extend_from_slice(&mask);
        f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        f
    }

    /// A reader of `bytes` that hands over at most `step` bytes a call.
    struct Trickle<'a> {
        bytes: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.bytes.len().min(self.step).min(buf.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    /// Reads `bytes` to their end: what the reader found, in order, and the error that ended it.
    fn read_all(bytes: &[u8], step: usize) -> (Vec<Got>, Option<String>, super::super::progress::Progress) {
        let mut p = progress();
        let (mut r, mut from) = (Reader::new(Vec::new()), Trickle { bytes, step });
        let mut got = vec![];
        for _ in 0..100_000 {
            match r.next(&mut from, &mut p) {
                Ok(Got::More) => {}
                Ok(g) => got.push(g),
                Err(e) => return (got, e, p),
            }
        }
        panic!("the reader did not reach the end");
    }

    #[test]
    fn frames_are_counted_whole_whatever_their_kind_and_however_they_arrive() {
        let mask = [9, 8, 7, 6];
        let text = br#"{"AppInfo":{"ElapsedTime":1,"NumBytes":2}}"#;
        let mut wire = client_frame(2, false, mask, &[1; 70_000]);
        wire.extend(client_frame(9, true, mask, b"ping!"));
        wire.extend(client_frame(0, true, mask, &[2; 10]));
        wire.extend(client_frame(1, false, mask, &text[..10]));
        wire.extend(client_frame(0, true, mask, &text[10..]));
        wire.extend(client_frame(1, true, mask, &vec![b'a'; MAX_TEXT + 1]));
        wire.extend(client_frame(8, true, mask, &[]));
        for step in [1, 3, 1000, CHUNK + 7] {
            let (got, end, p) = read_all(&wire, step);
            assert_eq!(got, vec![Got::Ping(b"ping!".to_vec()), Got::Close], "{step}");
            assert_eq!(end, None);
            assert_eq!(p.bytes, 70_010);
            assert_eq!(p.other, 5 + text.len() as u64 + MAX_TEXT as u64 + 1);
            // The small text message is kept as the client's measurement; the large one is not.
            assert_eq!(p.seen.client_kept(), 1);
        }
    }

    #[test]
    fn protocol_errors_end_the_subtest_with_a_reason() {
        let cases: [(Vec<u8>, &str); 5] = [
            (vec![0x82, 0x03, 1, 2, 3], "without a mask"),
            (client_frame(0, true, [1; 4], b"x"), "continuation frame outside"),
            (client_frame(9, false, [1; 4], b"x"), "control frame fragmented"),
            (client_frame(2 | 0x40, true, [1; 4], b"x"), "reserved bits"),
            (
                [0x82, 0xff]
                    .iter()
                    .chain(&(1u64 << 40).to_be_bytes())
                    .chain(&[0; 4])
                    .copied()
                    .collect(),
                "16 MiB",
            ),
        ];
        for (wire, why) in cases {
            let (_, end, _) = read_all(&wire, 2);
            assert!(
                end.as_deref().is_some_and(|e| e.contains(why)),
                "{end:?} for {why}"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn hostile_bytes_never_panic_and_never_count_more_than_arrived(
            bytes in proptest::collection::vec(any::<u8>(), 0..3000),
            step in 1usize..64,
        ) {
            let (_, _, p) = read_all(&bytes, step);
            prop_assert!(p.bytes + p.other <= bytes.len() as u64);
        }
    }

    #[test]
    fn unmasking_matches_the_rfc_at_every_length_and_phase() {
        let mask = [0x37, 0xfa, 0x21, 0x3d];
        for phase in 0..4 {
            for len in [0, 1, 3, 7, 8, 9, 15, 16, 17, 1000] {
                let data: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
                let mut out = vec![1, 2, 3];
                unmask(&data, mask, phase, &mut out);
                let want: Vec<u8> = (data.iter().enumerate())
                    .map(|(i, b)| b ^ mask[(i + phase) % 4])
                    .collect();
                assert_eq!(out, want, "{len} at {phase}");
            }
        }
    }

    #[test]
    fn fragments_keep_their_messages_kind_and_order_is_enforced() {
        let mut inside = None;
        assert_eq!(order(&mut inside, 2, false), Ok(Kind::Binary));
        assert_eq!(order(&mut inside, 0, false), Ok(Kind::Binary));
        assert!(order(&mut inside, 1, true).is_err());
        assert_eq!(order(&mut inside, 0, true), Ok(Kind::Binary));
        assert_eq!(inside, None);
        assert!(order(&mut inside, 0, true).is_err());
        assert_eq!(order(&mut inside, 1, false), Ok(Kind::Text));
        assert_eq!(order(&mut inside, 0, true), Ok(Kind::Text));
        assert_eq!(order(&mut inside, 2, true), Ok(Kind::Binary));
        assert!(order(&mut inside, 3, true).is_err());
    }

    #[test]
    fn header_lengths_follow_the_length_marker_and_the_mask_bit() {
        assert_eq!(header_len(&[0x82]), None);
        assert_eq!(header_len(&[0x82, 0x85]), Some(6));
        assert_eq!(header_len(&[0x82, 0xfe]), Some(8));
        assert_eq!(header_len(&[0x82, 0xff]), Some(14));
        assert_eq!(header_len(&[0x82, 0x05]), Some(2));
    }
}
