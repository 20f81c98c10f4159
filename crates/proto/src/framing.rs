//! Length-delimited framing for control messages: a 4-byte big-endian length, then that many bytes of
//! JSON. The decoder is incremental (bytes in, messages out) so the same code serves blocking and
//! non-blocking drivers and the fuzzer, and it refuses an oversized length before allocating anything.

use super::messages::Message;

/// Largest control message accepted. A final report for 2048 streams fits with room to spare.
pub const MAX_FRAME_LEN: usize = 8 << 20;
/// Largest control message a server takes before it has accepted a test: a hello, a test request, a
/// clock probe or an order is well under 4 KiB, so a stranger who has proved nothing cannot make the
/// server hold more than this for it.
pub const MAX_EARLY_FRAME_LEN: usize = 16 << 10;

/// Why bytes on a control connection could not be turned into a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A length prefix over the limit.
    #[error("control message of {len} bytes exceeds the {max}-byte limit")]
    TooLong {
        /// The length announced.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A frame with no body.
    #[error("empty control message")]
    Empty,
    /// A body that is not a message (its JSON does not read).
    #[error("malformed control message: {0}")]
    Malformed(String),
}

/// A message's JSON bytes (a frame's body).
pub fn body(msg: &Message) -> Vec<u8> {
    serde_json::to_vec(msg).unwrap_or_else(|e| {
        // Serializing our own types cannot fail; if it ever did, send an error the peer can show.
        serde_json::to_vec(&Message::Error {
            message: format!("internal: {e}"),
        })
        .unwrap_or_default()
    })
}

/// The message in a frame's body.
pub fn decode_body(body: &[u8]) -> Result<Message, FrameError> {
    serde_json::from_slice::<Message>(body).map_err(|e| FrameError::Malformed(e.to_string()))
}

/// Serializes a message into one unsealed frame.
pub fn encode(msg: &Message) -> Vec<u8> {
    let body = body(msg);
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Reassembles frames from arbitrary chunks of bytes.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    /// The largest frame taken now (0: `MAX_FRAME_LEN`).
    max: usize,
}

impl FrameDecoder {
    /// A decoder with nothing read yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes frames of at most `max` bytes from now on (never more than `MAX_FRAME_LEN`).
    pub fn set_max(&mut self, max: usize) {
        self.max = max.min(MAX_FRAME_LEN);
    }

    fn max(&self) -> usize {
        if self.max == 0 {
            MAX_FRAME_LEN
        } else {
            self.max
        }
    }

    /// Appends bytes read from the connection.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held that do not yet form a whole frame.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// How many more bytes the next frame needs (at least 1 when nothing is decodable).
    pub fn wanted(&self) -> usize {
        if self.buf.len() < 4 {
            return 4 - self.buf.len();
        }
        let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
        (4 + len.min(self.max())).saturating_sub(self.buf.len()).max(1)
    }

    /// The next complete message of an unsealed conversation, `Ok(None)` if more bytes are needed.
    /// After an error the connection should be closed: the stream's framing can no longer be trusted.
    pub fn next_message(&mut self) -> Result<Option<Message>, FrameError> {
        self.next_frame()?.map(|b| decode_body(&b)).transpose()
    }

    /// The next complete frame's bytes (after its length), `Ok(None)` if more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
        if len > self.max() {
            return Err(FrameError::TooLong { len, max: self.max() });
        }
        if len == 0 {
            return Err(FrameError::Empty);
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        let frame = self.buf[4..4 + len].to_vec();
        self.buf.drain(..4 + len);
        Ok(Some(frame))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_in_any_chunking() {
        let msgs = vec![
            Message::Hello {
                version: 1,
                software: "t".into(),
                auth: None,
            },
            Message::TestRequest {
                spec: Box::default(),
                auth: None,
            },
            Message::Start,
        ];
        let wire: Vec<u8> = msgs.iter().flat_map(encode).collect();
        for chunk in [1, 2, 3, 7, 64, wire.len()] {
            let mut d = FrameDecoder::new();
            let mut out = vec![];
            for c in wire.chunks(chunk) {
                d.push(c);
                while let Some(m) = d.next_message().unwrap() {
                    out.push(m);
                }
            }
            assert_eq!(out, msgs);
            assert_eq!(d.buffered(), 0);
        }
    }

    #[test]
    fn oversized_is_refused_before_reading_body() {
        let mut d = FrameDecoder::new();
        d.push(&u32::MAX.to_be_bytes());
        assert!(matches!(d.next_message(), Err(FrameError::TooLong { .. })));
    }

    #[test]
    fn malformed_and_empty_are_errors() {
        let mut d = FrameDecoder::new();
        d.push(&[0, 0, 0, 0]);
        assert_eq!(d.next_message(), Err(FrameError::Empty));
        let mut d = FrameDecoder::new();
        d.push(&[0, 0, 0, 3]);
        d.push(b"{x}");
        assert!(matches!(d.next_message(), Err(FrameError::Malformed(_))));
        let mut d = FrameDecoder::new();
        d.push(&[0, 0, 0, 14]);
        d.push(br#"{"type":"zap"}"#);
        assert!(matches!(d.next_message(), Err(FrameError::Malformed(_))));
    }

    #[test]
    fn truncated_waits_for_more() {
        let wire = encode(&Message::Ready);
        let mut d = FrameDecoder::new();
        d.push(&wire[..wire.len() - 1]);
        assert_eq!(d.next_message(), Ok(None));
        assert_eq!(d.wanted(), 1);
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let mut d = FrameDecoder::new();
            d.push(&bytes);
            for _ in 0..4 {
                match d.next_message() { Ok(Some(_)) => continue, _ => break }
            }
        }
    }
}
