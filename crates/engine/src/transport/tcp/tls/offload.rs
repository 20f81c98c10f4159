//! Kernel TLS (`--ktls`): the same traffic keys rustls hands the record layer, installed in the socket
//! instead (Linux's `tls` upper-layer protocol), so the kernel seals what is written and opens what is
//! read, and the workers send and receive plaintext as over plain TCP. A kernel with TLS offload in its
//! NIC driver passes the work on to the NIC; otherwise the kernel's own AES-GCM or ChaCha20-Poly1305
//! does it, in the send and receive calls. Records that are not application data (close_notify, a
//! KeyUpdate, a NewSessionTicket) pass as control messages: sent with their record type in a cmsg,
//! received with it in one. This module is the system calls and the `tls_crypto_info` layout; when to
//! use them is `super::Session`'s. Linux only: elsewhere every call fails as unsupported.

use super::record::RecordError;
use rustls::ConnectionTrafficSecrets;

/// The record content type of application data, what a read returns when no control message says
/// otherwise.
pub(super) const APPLICATION_DATA: u8 = 23;

/// Which half of the connection a key is for.
#[derive(Clone, Copy, Debug)]
pub(super) enum Direction {
    Tx,
    Rx,
}

/// The kernel's `tls12_crypto_info_*` for TLS 1.3 with `secrets` from sequence number `seq`: version,
/// cipher type (both in host byte order), then the IV's last 8 bytes (all 12 for ChaCha20), the key,
/// the IV's first 4 (the "salt"; none for ChaCha20) and the sequence number big-endian.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // used by the Linux calls and the tests
pub(super) fn crypto_info(seq: u64, secrets: &ConnectionTrafficSecrets) -> Result<Vec<u8>, RecordError> {
    let (cipher, key, iv) = match secrets {
        ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (AES_GCM_128, key, iv),
        ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (AES_GCM_256, key, iv),
        ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => (CHACHA20_POLY1305, key, iv),
        _ => return Err(RecordError::Suite("not AES-GCM or ChaCha20-Poly1305".into())),
    };
    layout(cipher, key.as_ref(), iv.as_ref(), seq)
}

/// The suite's AEAD, in words.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // used by the Linux calls and the tests
fn suite_name(secrets: &ConnectionTrafficSecrets) -> &'static str {
    match secrets {
        ConnectionTrafficSecrets::Aes128Gcm { .. } => "AES-128-GCM",
        ConnectionTrafficSecrets::Aes256Gcm { .. } => "AES-256-GCM",
        ConnectionTrafficSecrets::Chacha20Poly1305 { .. } => "ChaCha20-Poly1305",
        _ => "AEAD of this suite",
    }
}

/// The kernel's cipher types (`TLS_CIPHER_*`).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // used by the Linux calls and the tests
const AES_GCM_128: u16 = 51;
#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // used by the Linux calls and the tests
const AES_GCM_256: u16 = 52;
#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // used by the Linux calls and the tests
const CHACHA20_POLY1305: u16 = 54;

#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // used by the Linux calls and the tests
fn layout(cipher: u16, key: &[u8], iv: &[u8], seq: u64) -> Result<Vec<u8>, RecordError> {
    const TLS_1_3: u16 = 0x0304;
    let salt_len = if cipher == CHACHA20_POLY1305 { 0 } else { 4 };
    if iv.len() != 12 {
        return Err(RecordError::Suite("IV length".into()));
    }
    let mut info = Vec::with_capacity(4 + iv.len() + key.len() + 8);
    info.extend_from_slice(&TLS_1_3.to_ne_bytes());
    info.extend_from_slice(&cipher.to_ne_bytes());
    info.extend_from_slice(&iv[salt_len..]);
    info.extend_from_slice(key);
    info.extend_from_slice(&iv[..salt_len]);
    info.extend_from_slice(&seq.to_be_bytes());
    Ok(info)
}

#[cfg(target_os = "linux")]
mod sys {
    use super::{crypto_info, Direction, APPLICATION_DATA};
    use rustls::ConnectionTrafficSecrets;
    use std::io::{Error, ErrorKind};
    use std::net::TcpStream;
    use std::os::fd::AsRawFd;

    fn setsockopt(sock: &TcpStream, level: i32, name: i32, value: &[u8]) -> std::io::Result<()> {
        // SAFETY: a valid socket and a buffer of the given length.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                level,
                name,
                value.as_ptr().cast(),
                value.len() as libc::socklen_t,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(Error::last_os_error())
        }
    }

    /// Turns the connected socket into a kernel TLS socket (no keys yet: it still passes bytes as
    /// they are until a direction gets its key).
    pub(in super::super) fn attach(sock: &TcpStream) -> std::io::Result<()> {
        setsockopt(sock, libc::SOL_TCP, libc::TCP_ULP, b"tls").map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT) => Error::new(
                ErrorKind::Unsupported,
                "kernel TLS: this kernel has no TLS upper-layer protocol (CONFIG_TLS, module `tls`)",
            ),
            _ => Error::new(e.kind(), format!("kernel TLS: TCP_ULP \"tls\": {e}")),
        })
    }

    /// Installs the key of one direction, from sequence number `seq`. A second key for a direction
    /// (after a KeyUpdate) needs a kernel that follows TLS 1.3 key updates.
    pub(in super::super) fn install(
        sock: &TcpStream,
        dir: Direction,
        seq: u64,
        secrets: &ConnectionTrafficSecrets,
    ) -> std::io::Result<()> {
        let info = crypto_info(seq, secrets).map_err(Error::other)?;
        let name = match dir {
            Direction::Tx => libc::TLS_TX,
            Direction::Rx => libc::TLS_RX,
        };
        setsockopt(sock, libc::SOL_TLS, name, &info).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT) => Error::new(
                ErrorKind::Unsupported,
                format!(
                    "kernel TLS: this kernel has no {} for TLS (its crypto module is not built or \
                     not loaded)",
                    super::suite_name(secrets)
                ),
            ),
            _ => Error::new(e.kind(), format!("kernel TLS: installing the {dir:?} key: {e}")),
        })?;
        if let Direction::Rx = dir {
            // The peer (landspeed or rustls) never pads records: the kernel may then decrypt straight
            // into the reader's buffer. Kernels before 6.0 lack the option; nothing else changes.
            let _ = setsockopt(
                sock,
                libc::SOL_TLS,
                libc::TLS_RX_EXPECT_NO_PAD,
                &1i32.to_ne_bytes(),
            );
        }
        Ok(())
    }

    /// Sends `body` as one record of content type `content` (a control record: alert, handshake).
    pub(in super::super) fn send_record(sock: &TcpStream, content: u8, body: &[u8]) -> std::io::Result<()> {
        let mut iov = libc::iovec {
            iov_base: body.as_ptr() as *mut libc::c_void,
            iov_len: body.len(),
        };
        let mut control = [0u64; 4];
        // SAFETY: the message points at live buffers of the lengths given; the cmsg macros stay within
        // `control`, which is large enough (and aligned) for one cmsg of one byte.
        let sent = unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE(1) as _;
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_TLS;
            (*cmsg).cmsg_type = libc::TLS_SET_RECORD_TYPE;
            (*cmsg).cmsg_len = libc::CMSG_LEN(1) as _;
            *libc::CMSG_DATA(cmsg) = content;
            libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL)
        };
        match sent {
            n if n < 0 => Err(Error::last_os_error()),
            n if n as usize == body.len() => Ok(()),
            n => Err(Error::new(
                ErrorKind::WriteZero,
                format!("kernel TLS took {n} of a {}-byte control record", body.len()),
            )),
        }
    }

    /// Reads plaintext into `buf`: the bytes and their record's content type. The kernel returns a
    /// record that is not application data alone, with its type in a control message; a record that
    /// does not authenticate fails the read with EBADMSG.
    pub(in super::super) fn recv_record(sock: &TcpStream, buf: &mut [u8]) -> std::io::Result<(usize, u8)> {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut control = [0u64; 4];
        // SAFETY: as in send_record; the kernel writes at most msg_controllen bytes of control.
        let (n, content) = unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&control) as _;
            let n = libc::recvmsg(sock.as_raw_fd(), &mut msg, 0);
            let mut content = APPLICATION_DATA;
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while n >= 0 && !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_TLS && (*cmsg).cmsg_type == libc::TLS_GET_RECORD_TYPE {
                    content = *libc::CMSG_DATA(cmsg);
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
            (n, content)
        };
        if n >= 0 {
            return Ok((n as usize, content));
        }
        let e = Error::last_os_error();
        Err(match e.raw_os_error() {
            Some(libc::EBADMSG) => Error::new(
                ErrorKind::InvalidData,
                "kernel TLS: a record did not authenticate (bad_record_mac)",
            ),
            Some(libc::EMSGSIZE) => Error::new(ErrorKind::InvalidData, "kernel TLS: record_overflow"),
            _ => e,
        })
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    use super::Direction;
    use rustls::ConnectionTrafficSecrets;
    use std::io::{Error, ErrorKind};
    use std::net::TcpStream;

    fn unsupported() -> Error {
        Error::new(ErrorKind::Unsupported, "kernel TLS is Linux's")
    }

    pub(in super::super) fn attach(_: &TcpStream) -> std::io::Result<()> {
        Err(unsupported())
    }

    pub(in super::super) fn install(
        _: &TcpStream,
        _: Direction,
        _: u64,
        _: &ConnectionTrafficSecrets,
    ) -> std::io::Result<()> {
        Err(unsupported())
    }

    pub(in super::super) fn send_record(_: &TcpStream, _: u8, _: &[u8]) -> std::io::Result<()> {
        Err(unsupported())
    }

    pub(in super::super) fn recv_record(_: &TcpStream, _: &mut [u8]) -> std::io::Result<(usize, u8)> {
        Err(unsupported())
    }
}

pub(super) use sys::{attach, install, recv_record, send_record};

#[cfg(test)]
mod tests {
    use super::*;

    const IV: [u8; 12] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];

    #[test]
    fn aes_gcm_info_splits_the_iv_into_salt_and_explicit_part() {
        let info = layout(AES_GCM_128, &[0xaa; 16], &IV, 0x0102).unwrap();
        assert_eq!(info.len(), 40);
        assert_eq!(&info[..4], &[0x04, 0x03, 51, 0][..]);
        assert_eq!(&info[4..12], &[4, 5, 6, 7, 8, 9, 10, 11][..]);
        assert_eq!(&info[12..28], &[0xaa; 16][..]);
        assert_eq!(&info[28..32], &[0, 1, 2, 3][..]);
        assert_eq!(&info[32..], &[0, 0, 0, 0, 0, 0, 1, 2][..]);
    }

    #[test]
    fn chacha20_info_has_the_whole_iv_and_no_salt() {
        let s = ConnectionTrafficSecrets::Chacha20Poly1305 {
            key: rustls::crypto::cipher::AeadKey::from([0xbb; 32]),
            iv: rustls::crypto::cipher::Iv::from(IV),
        };
        let info = crypto_info(7, &s).unwrap();
        assert_eq!(info.len(), 56);
        assert_eq!(&info[2..4], &54u16.to_ne_bytes()[..]);
        assert_eq!(&info[4..16], &IV[..]);
        assert_eq!(&info[16..48], &[0xbb; 32][..]);
        assert_eq!(info[55], 7);
        assert!(layout(AES_GCM_256, &[0; 32], &IV[..8], 0).is_err());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_layout_is_the_kernels() {
        let size = |c, k: &[u8]| layout(c, k, &IV, 0).unwrap().len();
        assert_eq!(
            size(AES_GCM_128, &[1; 16]),
            std::mem::size_of::<libc::tls12_crypto_info_aes_gcm_128>()
        );
        assert_eq!(
            size(AES_GCM_256, &[1; 32]),
            std::mem::size_of::<libc::tls12_crypto_info_aes_gcm_256>()
        );
        assert_eq!(
            size(CHACHA20_POLY1305, &[1; 32]),
            std::mem::size_of::<libc::tls12_crypto_info_chacha20_poly1305>()
        );
        assert_eq!(libc::TLS_1_3_VERSION.to_ne_bytes(), [0x04, 0x03]);
        let kernel = [libc::TLS_CIPHER_AES_GCM_128, libc::TLS_CIPHER_AES_GCM_256];
        assert_eq!(kernel, [AES_GCM_128, AES_GCM_256]);
        assert_eq!(libc::TLS_CIPHER_CHACHA20_POLY1305, CHACHA20_POLY1305);
    }
}
