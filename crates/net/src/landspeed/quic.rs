//! landspeed's QUIC streams on the server: the endpoint (`server::quic`) hands each connection
//! whose ALPN is "landspeed" here; a stream starts with the same hello a TCP stream sends (session
//! and stream number) and is then handed to its test like a TCP connection.

use crate::control::{Arrival, Input, QuicArrival};
use crate::host::{RefusalKind, Shared};
use landspeed_engine::supervisor::Wake;
use landspeed_proto::Preamble;
use std::net::SocketAddr;

/// Accepts the streams of a landspeed QUIC connection and hands each to the test its hello names.
/// Until its first stream reaches a running test, the connection holds a place among connections
/// still proving themselves (`PREAUTH_CAPS`, fair by address and network), for at most one handshake timeout: a
/// flood of QUIC connections that open no stream is bounded like one of silent TCP connections.
pub(crate) async fn streams(conn: quinn::Connection, peer: SocketAddr, shared: &Shared) {
    let timeout = shared.opts.handshake_timeout;
    let closer = {
        let conn = conn.clone();
        move || conn.close(2u32.into(), b"evicted: its place went to a client holding fewer")
    };
    let mut place = match shared.preauth(peer, closer) {
        Ok(p) => Some(p),
        Err(_) => {
            shared.refuse(
                peer,
                RefusalKind::Busy,
                "busy: too many QUIC connections still opening their first stream",
            );
            return conn.close(2u32.into(), b"busy");
        }
    };
    loop {
        let next = if place.is_some() {
            match tokio::time::timeout(timeout, conn.accept_bi()).await {
                Ok(n) => n,
                Err(_) => {
                    shared.refuse(
                        peer,
                        RefusalKind::Greeting,
                        format!("a QUIC connection that opened no stream within {timeout:?}"),
                    );
                    return conn.close(2u32.into(), b"no stream");
                }
            }
        } else {
            conn.accept_bi().await
        };
        let Ok((send, mut recv)) = next else { return };
        let hello = tokio::time::timeout(timeout, read_hello(&mut recv)).await;
        let Ok(Some(p @ Preamble::Data { session, stream, .. })) = hello else {
            shared.refuse(
                peer,
                RefusalKind::Malformed,
                "a QUIC stream without a landspeed hello",
            );
            conn.close(2u32.into(), b"no hello");
            return;
        };
        let waiter = shared.registry.lock().ok().and_then(|r| r.get(&session).cloned());
        let Some(w) = waiter else {
            conn.close(3u32.into(), b"unknown session");
            return;
        };
        if let Err(why) = w.admits(&p, peer.ip()) {
            shared.refuse(peer, RefusalKind::ForeignStream, format!("QUIC {why}"));
            conn.close(3u32.into(), b"not the test's stream");
            return;
        }
        let arrival = QuicArrival {
            conn: conn.clone(),
            send,
            recv,
        };
        let _ =
            w.tx.send(Wake::External(Input::Arrival(Arrival::Quic(stream, arrival))));
        place = None;
    }
}

/// Reads a stream's hello (the TCP preamble), at most a small bound of bytes.
async fn read_hello(recv: &mut quinn::RecvStream) -> Option<Preamble> {
    let mut buf = Vec::with_capacity(64);
    loop {
        if let Ok(Some((p, used))) = Preamble::parse(&buf) {
            return (used == buf.len()).then_some(p);
        }
        if buf.len() >= 64 {
            return None;
        }
        let mut byte = [0u8; 1];
        recv.read_exact(&mut byte).await.ok()?;
        buf.push(byte[0]);
    }
}
