//! TLS 1.3's record protection (RFC 8446 §5.2-5.3) for one direction of a data connection, done by
//! landspeed over the traffic keys rustls hands over once its handshake is done (rustls' `kernel` API,
//! made for kernel TLS). rustls' own record layer copies every byte three times on its way (plaintext
//! into a record, the socket's bytes into its deframer, the opened plaintext out) and allocates per
//! record; here the payload is sealed where it will be written from and opened where it was read
//! into, so verification reads the plaintext in place. Only the AEAD is aws-lc-rs'; this module is
//! the framing around it: the header as associated data, the per-record nonce (the IV xor the
//! sequence number), the inner content type after the content, and the checks a receiver owes.
//! Sans-IO: it works on byte slices and never touches a socket.

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, AES_256_GCM, CHACHA20_POLY1305};
use rustls::ConnectionTrafficSecrets;

/// The most content one record carries (2^14 bytes).
pub(super) const PLAINTEXT_MAX: usize = 16 * 1024;

/// A record header: content type, legacy version, length.
pub(super) const HEADER: usize = 5;

/// The AEAD tag of every suite landspeed offers.
pub(super) const TAG: usize = 16;

/// Bytes a record adds to its content: the header, the inner content type and the tag.
pub(super) const OVERHEAD: usize = HEADER + 1 + TAG;

/// The longest record this end writes.
pub(super) const RECORD_MAX: usize = PLAINTEXT_MAX + OVERHEAD;

/// The longest encrypted record a peer may send (RFC 8446 §5.2: 2^14 + 256 after the header).
const CIPHERTEXT_MAX: usize = PLAINTEXT_MAX + 256;

/// The outer content type of every protected record.
const APPLICATION_DATA: u8 = 23;

/// What a record carries, from its inner content type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Content {
    /// An alert (close_notify ends a stream).
    Alert,
    /// Post-handshake messages (KeyUpdate, NewSessionTicket).
    Handshake,
    /// The payload.
    ApplicationData,
}

impl Content {
    /// The inner content type's byte.
    pub(super) fn byte(self) -> u8 {
        match self {
            Content::Alert => 21,
            Content::Handshake => 22,
            Content::ApplicationData => APPLICATION_DATA,
        }
    }
}

/// Why a record could not be opened or sealed; each is fatal to the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum RecordError {
    /// The tag did not match: the bytes were altered on the way, or the two ends' keys differ.
    #[error("a TLS record failed authentication (bad_record_mac): altered on the way, or the keys differ")]
    BadRecordMac,
    /// A record longer than TLS allows.
    #[error("a TLS record of {0} bytes is longer than TLS 1.3 allows (record_overflow)")]
    RecordOverflow(usize),
    /// A record that is not protected application data on the outside (a plaintext alert, say).
    #[error("an unprotected TLS record (content type {0}) after the handshake (unexpected_message)")]
    Unprotected(u8),
    /// An opened record with no content type (all zeros) or one TLS 1.3 does not protect.
    #[error("a TLS record with inner content type {0} (unexpected_message)")]
    InnerType(u8),
    /// The suite rustls agreed on is not one this record layer implements.
    #[error("the negotiated TLS suite has no record layer here: {0}")]
    Suite(String),
    /// The sequence number would wrap (2^64 records under one key).
    #[error("the TLS sequence number would wrap")]
    SequenceWrap,
}

/// One direction's traffic key, IV and sequence number.
pub(super) struct Keys {
    key: LessSafeKey,
    iv: [u8; 12],
    seq: u64,
}

impl Keys {
    /// The keys rustls derived, starting at sequence number `seq`.
    pub(super) fn new(seq: u64, secrets: &ConnectionTrafficSecrets) -> Result<Keys, RecordError> {
        let (alg, key, iv) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (&AES_128_GCM, key, iv),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (&AES_256_GCM, key, iv),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => (&CHACHA20_POLY1305, key, iv),
            _ => return Err(RecordError::Suite("not AES-GCM or ChaCha20-Poly1305".into())),
        };
        let key = UnboundKey::new(alg, key.as_ref()).map_err(|e| RecordError::Suite(e.to_string()))?;
        let iv: [u8; 12] = iv
            .as_ref()
            .try_into()
            .map_err(|_| RecordError::Suite("IV length".into()))?;
        Ok(Keys {
            key: LessSafeKey::new(key),
            iv,
            seq,
        })
    }

    /// Records protected under this key so far (the next record's sequence number).
    pub(super) fn seq(&self) -> u64 {
        self.seq
    }

    /// The next record's nonce (the IV xor the sequence number, right-aligned), and the step.
    fn next_nonce(&mut self) -> Result<Nonce, RecordError> {
        let mut n = self.iv;
        for (b, s) in n[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *b ^= s;
        }
        self.seq = self.seq.checked_add(1).ok_or(RecordError::SequenceWrap)?;
        Ok(Nonce::assume_unique_for_key(n))
    }

    /// Seals one record into `rec` from `inner` (the content followed by its content type byte, no
    /// padding), read where it lies: the cipher writes the ciphertext straight into the record, so the
    /// payload is not copied first. `rec` must have room for the header, `inner` and the tag; returns
    /// the record's length on the wire.
    pub(super) fn seal(&mut self, rec: &mut [u8], inner: &[u8]) -> Result<usize, RecordError> {
        assert!(
            !inner.is_empty() && inner.len() <= PLAINTEXT_MAX + 1,
            "record content"
        );
        let body = inner.len() + TAG;
        rec[..HEADER].copy_from_slice(&header(body));
        let nonce = self.next_nonce()?;
        let (head, rest) = rec.split_at_mut(HEADER);
        self.key
            .seal_in_place_scatter(nonce, Aad::from(&head[..]), &mut [], inner, &mut rest[..body])
            .map_err(|_| RecordError::BadRecordMac)?;
        Ok(HEADER + body)
    }

    /// Opens the record at the front of `buf` in place, if all of it is there (None: read more).
    pub(super) fn open(&mut self, buf: &mut [u8]) -> Result<Option<Opened>, RecordError> {
        let Some(len) = whole_record(buf)? else {
            return Ok(None);
        };
        let nonce = self.next_nonce()?;
        let (head, rest) = buf.split_at_mut(HEADER);
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(&head[..]), &mut rest[..len - HEADER])
            .map_err(|_| RecordError::BadRecordMac)?;
        // The content type is the last byte that is not padding.
        let Some(at) = plain.iter().rposition(|b| *b != 0) else {
            return Err(RecordError::InnerType(0));
        };
        let content = match plain[at] {
            21 => Content::Alert,
            22 => Content::Handshake,
            APPLICATION_DATA => Content::ApplicationData,
            t => return Err(RecordError::InnerType(t)),
        };
        Ok(Some(Opened {
            len,
            content,
            plain: HEADER..HEADER + at,
        }))
    }
}

/// A record opened at the front of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Opened {
    /// The whole record's length: where the next one starts.
    pub(super) len: usize,
    /// What it carries.
    pub(super) content: Content,
    /// Where its content lies in the buffer.
    pub(super) plain: std::ops::Range<usize>,
}

/// The header of a protected record whose body (content, content type, tag) is `body` bytes.
fn header(body: usize) -> [u8; HEADER] {
    let l = (body as u16).to_be_bytes();
    [APPLICATION_DATA, 3, 3, l[0], l[1]]
}

/// The body length a record header at the front of `buf` (at least `HEADER` bytes) gives.
pub(super) fn body_len(buf: &[u8]) -> usize {
    usize::from(u16::from_be_bytes([buf[3], buf[4]]))
}

/// The length of the record at the front of `buf` (header included) if all of it is there; a header
/// that no TLS 1.3 peer sends after its handshake is refused before its body arrives.
pub(super) fn whole_record(buf: &[u8]) -> Result<Option<usize>, RecordError> {
    let Some(h) = buf.get(..HEADER) else {
        return Ok(None);
    };
    if h[0] != APPLICATION_DATA {
        return Err(RecordError::Unprotected(h[0]));
    }
    let body = usize::from(u16::from_be_bytes([h[3], h[4]]));
    if body > CIPHERTEXT_MAX {
        return Err(RecordError::RecordOverflow(body));
    }
    Ok((buf.len() >= HEADER + body).then_some(HEADER + body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(k: u8) -> ConnectionTrafficSecrets {
        ConnectionTrafficSecrets::Aes256Gcm {
            key: rustls::crypto::cipher::AeadKey::from([k; 32]),
            iv: rustls::crypto::cipher::Iv::from([k ^ 0x5a; 12]),
        }
    }

    fn sealed(keys: &mut Keys, content: &[u8], kind: Content) -> Vec<u8> {
        let mut rec = vec![0u8; content.len() + OVERHEAD];
        let inner = [content, &[kind.byte()]].concat();
        let n = keys.seal(&mut rec, &inner).unwrap();
        rec.truncate(n);
        rec
    }

    #[test]
    fn a_sealed_record_opens_to_its_content_in_sequence() {
        let (mut tx, mut rx) = (
            Keys::new(0, &secrets(1)).unwrap(),
            Keys::new(0, &secrets(1)).unwrap(),
        );
        for (i, kind) in [Content::ApplicationData, Content::Alert, Content::Handshake]
            .into_iter()
            .enumerate()
        {
            let content: Vec<u8> = (0..1000 * i + 3).map(|j| (j * 7) as u8).collect();
            let mut rec = sealed(&mut tx, &content, kind);
            assert_eq!(rec.len(), content.len() + OVERHEAD);
            assert_eq!(&rec[..3], &[23, 3, 3]);
            let o = rx.open(&mut rec).unwrap().unwrap();
            assert_eq!((o.len, o.content), (content.len() + OVERHEAD, kind));
            assert_eq!(&rec[o.plain], &content[..]);
        }
        assert_eq!((tx.seq(), rx.seq()), (3, 3));
    }

    #[test]
    fn a_record_altered_replayed_or_under_other_keys_fails_authentication() {
        let mut tx = Keys::new(0, &secrets(1)).unwrap();
        let rec = sealed(&mut tx, b"payload", Content::ApplicationData);
        for at in [0usize, 4, 5, rec.len() - 1] {
            let mut bad = rec.clone();
            bad[at] ^= 1;
            let mut rx = Keys::new(0, &secrets(1)).unwrap();
            // A flipped length is a shorter or longer record: incomplete or failing, never opened.
            assert!(!matches!(rx.open(&mut bad), Ok(Some(_))), "byte {at}");
        }
        let mut rx = Keys::new(1, &secrets(1)).unwrap();
        assert_eq!(
            rx.open(&mut rec.clone()),
            Err(RecordError::BadRecordMac),
            "replayed at seq 1"
        );
        let mut rx = Keys::new(0, &secrets(2)).unwrap();
        assert_eq!(rx.open(&mut rec.clone()), Err(RecordError::BadRecordMac));
    }

    #[test]
    fn headers_no_tls13_peer_sends_are_refused_before_the_body_and_a_part_waits() {
        assert_eq!(whole_record(&[23, 3, 3]), Ok(None));
        assert_eq!(whole_record(&[23, 3, 3, 0, 30, 1, 2]), Ok(None));
        assert_eq!(whole_record(&[21, 3, 3, 0, 2]), Err(RecordError::Unprotected(21)));
        assert_eq!(
            whole_record(&[23, 3, 3, 0x41, 1]),
            Err(RecordError::RecordOverflow(0x4101))
        );
        assert_eq!(
            whole_record(&[23, 3, 3, 0x41, 0, 9]),
            Ok(None),
            "2^14 + 256 is allowed"
        );
    }

    #[test]
    fn padding_is_stripped_and_a_record_of_only_padding_is_refused() {
        let (mut tx, mut rx) = (
            Keys::new(0, &secrets(3)).unwrap(),
            Keys::new(0, &secrets(3)).unwrap(),
        );
        let mut rec = vec![0u8; 64];
        // Content "ab", inner type 23, then three zeros of padding.
        let n = tx.seal(&mut rec, b"ab\x17\0\0\0").unwrap();
        let o = rx.open(&mut rec[..n]).unwrap().unwrap();
        assert_eq!((o.content, &rec[o.plain]), (Content::ApplicationData, &b"ab"[..]));
        let n = tx.seal(&mut rec, &[0; 5]).unwrap();
        assert_eq!(rx.open(&mut rec[..n]), Err(RecordError::InnerType(0)));
        let n = tx.seal(&mut rec, &[1, 20]).unwrap();
        assert_eq!(rx.open(&mut rec[..n]), Err(RecordError::InnerType(20)));
    }

    proptest::proptest! {
        /// Whatever arrives, opening never panics, never reports a record longer than the bytes
        /// given, and gives content only from records that authenticate: bytes not sealed under the
        /// key (junk, or the one sealed record cut short or with one byte changed) never open.
        #[test]
        fn hostile_bytes_never_open_and_never_panic(
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
            header in proptest::prelude::any::<bool>(),
            cut in 0usize..100,
            flip in proptest::option::of((0usize..100, 1u8..=255)),
        ) {
            let mut rx = Keys::new(0, &secrets(9)).unwrap();
            let mut buf = junk.clone();
            if header && buf.len() >= HEADER {
                buf[..3].copy_from_slice(&[23, 3, 3]);
            }
            if let Ok(Some(o)) = rx.open(&mut buf) {
                proptest::prop_assert!(false, "junk opened: {:?}", o);
            }
            let mut tx = Keys::new(0, &secrets(9)).unwrap();
            let mut rec = sealed(&mut tx, &junk, Content::ApplicationData);
            let keep = rec.len().saturating_sub(cut);
            rec.truncate(keep);
            let changed = flip.filter(|(at, _)| *at < rec.len());
            if let Some((at, x)) = changed {
                rec[at] ^= x;
            }
            let mut rx = Keys::new(0, &secrets(9)).unwrap();
            match rx.open(&mut rec) {
                Ok(Some(o)) => {
                    proptest::prop_assert!(changed.is_none() && cut == 0);
                    proptest::prop_assert!(o.len <= rec.len());
                    proptest::prop_assert_eq!(&rec[o.plain], &junk[..]);
                }
                Ok(None) => proptest::prop_assert!(cut > 0 || changed.is_some()),
                Err(_) => proptest::prop_assert!(changed.is_some()),
            }
        }
    }
}
