//! The record layer against itself and against rustls' own: a rustls peer (its buffered connection,
//! unchanged) must read what landspeed seals, key updates included, and landspeed must read what rustls
//! seals; hostile bytes after the handshake must end the stream with the reason.

use super::*;
use crate::tls::{client_config, Identity, Trust};
use landspeed_core::tls::CertFingerprint;
use std::net::TcpListener;

const T: Duration = Duration::from_secs(5);

/// A connected pair of loopback sockets: (client, server).
fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    (c, l.accept().unwrap().0)
}

type Both = (
    Result<TlsLink, HandshakeError>,
    Result<TlsLink, HandshakeError>,
    TcpStream,
    TcpStream,
);

/// Handshakes over a fresh pair: the server on its own thread, the client trusting `trust`.
fn handshake_pair(suite: TlsCipher, trust: impl FnOnce(&Identity) -> Trust) -> Both {
    let id = Identity::self_signed().unwrap();
    let (c, s) = pair();
    let sc = id.server_config(&[]).unwrap();
    let s2 = s.try_clone().unwrap();
    let server = std::thread::spawn(move || TlsLink::server(&s2, sc, T, false));
    let cc = client_config(&[suite], trust(&id), &[]).unwrap();
    let client = TlsLink::client(&c, cc, T, false);
    if client.is_err() {
        let _ = c.shutdown(std::net::Shutdown::Both);
    }
    (client, server.join().unwrap(), c, s)
}

fn data(n: u32) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

/// Sends all of `data`, then close_notify; the records sealed.
fn send_all(tx: &mut Session, sock: &TcpStream, data: &[u8]) -> u64 {
    let mut off = 0;
    while off < data.len() {
        off += send(tx, sock, &data[off..]).unwrap();
    }
    tx.close(sock, T).unwrap();
    tx.records
}

/// One send of as much of `data` as the session takes (the payload copied with a spare byte after it,
/// as the generator hands it over).
fn send(tx: &mut Session, sock: &TcpStream, data: &[u8]) -> std::io::Result<usize> {
    let mut spare = Vec::new();
    tx.send(sock, |room| {
        spare = data[..room.min(data.len())].to_vec();
        spare.push(0xee);
        &mut spare[..]
    })
}

/// Everything received up to close_notify (or the first error).
fn recv_all(rx: &mut Session, sock: &TcpStream) -> std::io::Result<Vec<u8>> {
    let mut got = Vec::new();
    while rx.recv(sock, |p| got.extend_from_slice(p))? > 0 {}
    Ok(got)
}

#[test]
fn pinned_handshake_agrees_on_the_asked_suite_and_carries_data_to_close_notify() {
    for suite in TlsCipher::ALL {
        let (c, s, cs, ss) = handshake_pair(suite, |id| Trust::Pinned(id.fingerprint));
        let (c, s) = (c.unwrap(), s.unwrap());
        assert_eq!((c.cipher(), s.cipher()), (suite, suite));
        let sent = std::thread::spawn(move || send_all(&mut c.lock(), &cs, &data(100_000)));
        assert_eq!(recv_all(&mut s.lock(), &ss).unwrap(), data(100_000));
        assert_eq!(sent.join().unwrap(), 100_000u64.div_ceil(16384));
    }
}

#[test]
fn a_certificate_other_than_the_pinned_one_fails_the_handshake() {
    let (c, s, _, _) = handshake_pair(TlsCipher::Aes128Gcm, |_| {
        Trust::Pinned(CertFingerprint([0xab; 32]))
    });
    let e = c.err().expect("the pin must not match").to_string();
    assert!(e.contains("not the pinned abab"), "{e}");
    assert!(s.is_err());
}

#[test]
fn a_peer_that_does_not_speak_tls_is_named() {
    let (c, s) = pair();
    drop(s);
    let cc = client_config(&[TlsCipher::Aes128Gcm], Trust::Any, &[]).unwrap();
    let e = TlsLink::client(&c, cc, T, false).err().unwrap().to_string();
    assert!(e.contains("is it speaking TLS?") || e.contains("reset"), "{e}");
}

#[test]
fn a_connection_that_ends_without_close_notify_is_reported_truncated() {
    let (c, s, cs, ss) = handshake_pair(TlsCipher::Aes128Gcm, |_| Trust::Any);
    let (c, s) = (c.unwrap(), s.unwrap());
    send(&mut c.lock(), &cs, b"partial").unwrap();
    cs.shutdown(std::net::Shutdown::Write).unwrap();
    let mut rx = s.lock();
    let mut got = Vec::new();
    assert_eq!(rx.recv(&ss, |p| got.extend_from_slice(p)).unwrap(), 7);
    assert_eq!(got, b"partial");
    let e = rx.recv(&ss, |_| {}).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnexpectedEof);
    assert!(e.to_string().contains("close_notify"), "{e}");
}

/// rustls' buffered server on `sock`: every byte up to close_notify, by rustls' own record layer.
fn rustls_reader(sock: TcpStream, id: &Identity) -> std::thread::JoinHandle<Vec<u8>> {
    let conn = rustls::ServerConnection::new(id.server_config(&[]).unwrap()).unwrap();
    std::thread::spawn(move || {
        let mut tls = rustls::StreamOwned::new(conn, sock);
        let mut got = Vec::new();
        tls.read_to_end(&mut got).unwrap();
        got
    })
}

#[test]
fn rustls_reads_what_this_record_layer_seals_across_key_updates() {
    for suite in TlsCipher::ALL {
        let id = Identity::self_signed().unwrap();
        let (c, s) = pair();
        let reader = rustls_reader(s, &id);
        let cc = client_config(&[suite], Trust::Pinned(id.fingerprint), &[]).unwrap();
        let link = TlsLink::client(&c, cc, T, false).unwrap();
        let mut tx = link.lock();
        // A new key every 3 records: 19 records of payload, so six KeyUpdates on the way.
        tx.key_limit = 4;
        send_all(&mut tx, &c, &data(300_000));
        assert_eq!(reader.join().unwrap(), data(300_000), "{suite:?}");
    }
}

/// landspeed's server on a fresh pair: every byte up to close_notify, by this record layer; the
/// client's socket.
fn landspeed_reader() -> (TcpStream, std::thread::JoinHandle<std::io::Result<Vec<u8>>>) {
    let id = Identity::self_signed().unwrap();
    let (c, s) = pair();
    let sc = id.server_config(&[]).unwrap();
    let server = std::thread::spawn(move || {
        let link = TlsLink::server(&s, sc, T, false).unwrap();
        let mut rx = link.lock();
        recv_all(&mut rx, &s)
    });
    (c, server)
}

#[test]
fn this_record_layer_reads_what_rustls_seals_across_its_key_update() {
    let (c, server) = landspeed_reader();
    let cc = client_config(&[TlsCipher::Aes256Gcm], Trust::Any, &[]).unwrap();
    let conn = rustls::ClientConnection::new(cc, crate::tls::server_name()).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, c);
    let d = data(200_000);
    tls.write_all(&d[..70_000]).unwrap();
    tls.conn.refresh_traffic_keys().unwrap();
    tls.write_all(&d[70_000..]).unwrap();
    tls.conn.send_close_notify();
    tls.flush().unwrap();
    assert_eq!(server.join().unwrap().unwrap(), d);
}

#[test]
fn a_key_update_the_peer_asks_for_is_answered_under_the_old_key_and_used_after() {
    let (c, s, cs, ss) = handshake_pair(TlsCipher::Aes128Gcm, |_| Trust::Any);
    let (c, s) = (c.unwrap(), s.unwrap());
    let (mut tx, mut rx) = (c.lock(), s.lock());
    // The sender asks (update_requested), moves to its next key, sends a record under it.
    tx.seal(&[KEY_UPDATE, 0, 0, 1, 1, 22]).unwrap();
    let next = tx.kernel.update_tx().unwrap();
    tx.tx = Keys::new(0, &next).unwrap();
    send(&mut tx, &cs, b"after").unwrap();
    let mut got = Vec::new();
    assert_eq!(rx.recv(&ss, |p| got.extend_from_slice(p)).unwrap(), 5);
    assert_eq!(got, b"after");
    // The receiver answered with its own KeyUpdate and closes under its new key: the sender opens both.
    rx.push(&CLOSE_NOTIFY).unwrap();
    rx.flush(&ss).unwrap();
    assert_eq!(tx.recv(&cs, |_| panic!("no payload expected")).unwrap(), 0);
    assert_eq!((tx.rx.seq(), tx.closed), (1, true));
}

/// A receiver after a handshake, fed `wire` by a raw socket in place of its peer.
fn receiver_fed(wire: impl FnOnce(&mut Session, &TcpStream)) -> std::io::Error {
    let (c, s, cs, ss) = handshake_pair(TlsCipher::Aes128Gcm, |_| Trust::Any);
    let (c, s) = (c.unwrap(), s.unwrap());
    wire(&mut c.lock(), &cs);
    cs.shutdown(std::net::Shutdown::Write).unwrap();
    let mut rx = s.lock();
    recv_all(&mut rx, &ss).unwrap_err()
}

#[test]
fn altered_or_unprotected_records_after_the_handshake_end_the_stream_with_the_reason() {
    let e = receiver_fed(|tx, sock| {
        tx.seal(b"will be altered\x17").unwrap();
        tx.out[8] ^= 0x40;
        tx.flush(sock).unwrap();
    });
    assert!(e.to_string().contains("bad_record_mac"), "{e}");
    let e = receiver_fed(|_, mut sock| sock.write_all(&[21, 3, 3, 0, 2, 2, 40]).unwrap());
    assert!(
        e.to_string().contains("unprotected TLS record (content type 21)"),
        "{e}"
    );
    let e = receiver_fed(|_, mut sock| sock.write_all(&[23, 3, 3, 0xff, 0xff]).unwrap());
    assert!(e.to_string().contains("record_overflow"), "{e}");
    let e = receiver_fed(|tx, sock| {
        tx.seal(&[2, 40, 21]).unwrap();
        tx.flush(sock).unwrap();
    });
    assert!(e.to_string().contains("HandshakeFailure"), "{e}");
    let e = receiver_fed(|tx, sock| {
        tx.seal(&[20, 0, 0, 1, 0, 22]).unwrap();
        tx.flush(sock).unwrap();
    });
    assert!(e.to_string().contains("handshake message 20 after"), "{e}");
}

#[test]
fn payload_that_arrives_with_the_peers_finished_is_opened_by_the_record_layer() {
    // rustls' buffered client holds payload written during the handshake and sends it in the same
    // write as its Finished: the server's handshake reads both, and must leave the payload, sealed,
    // to the record layer rather than to rustls.
    let (c, server) = landspeed_reader();
    let cc = client_config(&[TlsCipher::Chacha20Poly1305], Trust::Any, &[]).unwrap();
    let mut conn = rustls::ClientConnection::new(cc, crate::tls::server_name()).unwrap();
    let d = data(40_000);
    conn.writer().write_all(&d).unwrap();
    let mut sock = &c;
    while conn.is_handshaking() || conn.wants_write() {
        conn.complete_io(&mut sock).unwrap();
    }
    conn.send_close_notify();
    while conn.wants_write() {
        conn.write_tls(&mut sock).unwrap();
    }
    assert_eq!(server.join().unwrap().unwrap(), d);
}

/// Handshakes over a fresh pair with kernel TLS at the ends asked for: (client, server).
fn kernel_pair(suite: TlsCipher, kernel: (bool, bool)) -> Both {
    let id = Identity::self_signed().unwrap();
    let (c, s) = pair();
    let sc = id.server_config(&[]).unwrap();
    let s2 = s.try_clone().unwrap();
    let server = std::thread::spawn(move || TlsLink::server(&s2, sc, T, kernel.1));
    let cc = client_config(&[suite], Trust::Any, &[]).unwrap();
    let client = TlsLink::client(&c, cc, T, kernel.0);
    if client.is_err() {
        let _ = c.shutdown(std::net::Shutdown::Both);
    }
    (client, server.join().unwrap(), c, s)
}

/// Where the kernel has no TLS (this project's CI kernel) `--ktls` fails with the reason; where it
/// has (run by hand in Debian's kernel: bench/ktls-vm), the kernel's records are landspeed's: every
/// suite, kernel to kernel and kernel to user space each way, to close_notify, then a forged record.
#[test]
fn kernel_tls_carries_data_both_ways_or_is_refused_with_its_reason() {
    if let Some(reason) = crate::tls::ktls_unavailable_reason() {
        let (c, s, _, _) = kernel_pair(TlsCipher::Aes128Gcm, (true, true));
        for e in [c.err(), s.err()] {
            let e = e.expect("kernel TLS cannot start here").to_string();
            assert!(e.contains("CONFIG_TLS"), "{e} ({reason})");
        }
        return;
    }
    for suite in TlsCipher::ALL {
        for kernel in [(true, true), (true, false), (false, true)] {
            kernel_round_trip(suite, kernel);
        }
    }
    kernel_refuses_a_forged_record();
    for kernel in [(true, false), (false, true)] {
        kernel_key_update_is_followed_or_reported(kernel);
    }
}

/// A key update every 4 records, with the kernel at one end: followed (kernels that can change a
/// kernel TLS key) or the stream ends saying the kernel cannot (older kernels), never silently wrong.
fn kernel_key_update_is_followed_or_reported(kernel: (bool, bool)) {
    let (c, s, cs, ss) = kernel_pair(TlsCipher::Aes128Gcm, kernel);
    let (c, s) = (c.unwrap(), s.unwrap());
    let sent = std::thread::spawn(move || {
        let mut tx = c.lock();
        tx.key_limit = 4;
        let mut off = 0;
        let d = data(300_000);
        while off < d.len() {
            off += send(&mut tx, &cs, &d[off..])?;
        }
        tx.close(&cs, T)
    });
    let got = recv_all(&mut s.lock(), &ss);
    let sent = sent.join().unwrap();
    let refused = |e: &std::io::Error| e.to_string().contains("cannot take the key");
    match (sent, got) {
        (Ok(()), Ok(got)) => assert!(got == data(300_000), "{kernel:?}: {} bytes", got.len()),
        (Err(e), _) | (Ok(()), Err(e)) => assert!(refused(&e), "{kernel:?}: {e}"),
    }
}

fn kernel_round_trip(suite: TlsCipher, kernel: (bool, bool)) {
    let (c, s, cs, ss) = kernel_pair(suite, kernel);
    let (c, s) = (c.unwrap(), s.unwrap());
    assert_eq!((c.in_kernel(), s.in_kernel()), kernel);
    let (cs2, ss2) = (cs.try_clone().unwrap(), ss.try_clone().unwrap());
    let c = Arc::new(c);
    let c2 = c.clone();
    let sent = std::thread::spawn(move || send_all(&mut c2.lock(), &cs2, &data(3_000_000)));
    let got = recv_all(&mut s.lock(), &ss).unwrap();
    assert!(
        got == data(3_000_000),
        "{suite:?} {kernel:?}: {} bytes",
        got.len()
    );
    sent.join().unwrap();
    let back = std::thread::spawn(move || send_all(&mut s.lock(), &ss2, &data(200_000)));
    assert!(
        recv_all(&mut c.lock(), &cs).unwrap() == data(200_000),
        "{suite:?} {kernel:?} back"
    );
    back.join().unwrap();
}

fn kernel_refuses_a_forged_record() {
    let (c, s, mut cs, ss) = kernel_pair(TlsCipher::Aes128Gcm, (false, true));
    let (_c, s) = (c.unwrap(), s.unwrap());
    let mut forged = vec![23, 3, 3, 0, 40];
    forged.extend_from_slice(&[0x5a; 40]);
    cs.write_all(&forged).unwrap();
    let e = recv_all(&mut s.lock(), &ss).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidData);
    assert!(e.to_string().contains("bad_record_mac"), "{e}");
}
