//! What a test costs a server in memory, estimated from its request before anything is allocated, so
//! a server can refuse (by name) a request that would not fit its budget instead of finding out by
//! running out of memory. The estimate is an upper bound of the engine's own buffers (a TCP worker
//! thread's payload generator, receive buffer and verifier, shared by its streams; an io_uring
//! stream's buffers times its queue depth; each UDP sender's batch), plus a fixed allowance per stream
//! and per worker thread for what the engine keeps beside them (meters, TCP_INFO series, the thread's
//! stack as touched). Kernel socket buffers are the
//! kernel's (bounded by its own sysctls) and not counted. docs/security.md, "Memory", has the rule and
//! the measured figures that check it.

use landspeed_core::config::{IoBackend, TestSpec, Transport};
use landspeed_core::endpoint::Role;

/// What the engine keeps per stream beside its buffers (meter, samples, TCP_INFO series), bytes: about
/// three times what 1,024 streams measured (22 MiB for the whole server).
pub const PER_STREAM_BYTES: u64 = 64 << 10;
/// The most worker threads the server starts for a test that names none (it starts one per stream up
/// to its CPU count; this bounds a CPU count the estimate does not know).
pub const DEFAULT_THREADS_BOUND: u64 = 64;
/// What a worker thread costs beside its streams (its stack as touched, its event loop), bytes.
pub const PER_THREAD_BYTES: u64 = 256 << 10;
/// What a test costs beside its streams (the session, the report), bytes.
pub const PER_TEST_BYTES: u64 = 2 << 20;
/// The payload pattern's pool each generator and verifier keeps beside its window, bytes.
const POOL_BYTES: u64 = landspeed_core::payload::POOL as u64;
/// The largest UDP datagram a receiver reads at once (GRO hands over up to 64 KiB).
const UDP_RECEIVE_BYTES: u64 = 64 << 10;
/// What a QUIC connection buffers per stream (quinn's windows, as the server configures them).
const QUIC_STREAM_BYTES: u64 = 16 << 20;
/// A TLS stream's records and rustls's own state, bytes.
const TLS_STREAM_BYTES: u64 = 256 << 10;

/// The most memory the server's end of `spec` may need, bytes (an upper bound; see the module).
pub fn server_estimate(spec: &TestSpec) -> u64 {
    let streams = u64::from(spec.total_streams());
    let threads = spec
        .server_threads
        .map_or(streams.min(DEFAULT_THREADS_BOUND), u64::from)
        .clamp(1, streams.max(1));
    let roles: Vec<Role> = (0..spec.total_streams())
        .map(|id| Role::at_server(spec.flow_of(id)))
        .collect();
    let buffers = match (spec.transport, spec.io) {
        // A TCP worker's buffers serve all its streams: a generator if it sends, a receive buffer and
        // a verifier if it receives.
        (Transport::Tcp, IoBackend::Epoll) => {
            let per_worker = [Role::Sender, Role::Receiver]
                .into_iter()
                .filter(|r| roles.contains(r))
                .map(|r| stream_buffers(spec, r))
                .sum::<u64>();
            per_worker.saturating_mul(threads)
        }
        _ => roles.iter().map(|&r| stream_buffers(spec, r)).sum(),
    };
    PER_TEST_BYTES
        .saturating_add(buffers)
        .saturating_add(streams.saturating_mul(PER_STREAM_BYTES))
        .saturating_add(threads.saturating_mul(PER_THREAD_BYTES))
}

/// One stream's buffers at the server, by what it does there.
fn stream_buffers(spec: &TestSpec, role: Role) -> u64 {
    let len = spec.length_bytes;
    let depth = match spec.io {
        IoBackend::Uring => u64::from(spec.queue_depth),
        IoBackend::Epoll => 1,
    };
    let window = len.saturating_add(POOL_BYTES);
    let verifier = if spec.verify { window } else { 0 };
    let tls = if spec.tls.is_some() { TLS_STREAM_BYTES } else { 0 };
    match (spec.transport, role) {
        (Transport::Tcp, Role::Sender) => window.saturating_mul(depth).saturating_add(tls),
        (Transport::Tcp, Role::Receiver) => len
            .saturating_mul(depth)
            .saturating_add(verifier)
            .saturating_add(tls),
        (Transport::Udp, Role::Sender) => len.saturating_mul(u64::from(spec.burst.max(64))),
        (Transport::Udp, Role::Receiver) => UDP_RECEIVE_BYTES.saturating_add(verifier),
        (Transport::Quic, Role::Sender) => window.saturating_add(QUIC_STREAM_BYTES),
        (Transport::Quic, Role::Receiver) => verifier.saturating_add(QUIC_STREAM_BYTES),
    }
}

/// Bytes as people read them (MiB or GiB, one decimal).
pub fn human(bytes: u64) -> String {
    let mib = bytes as f64 / f64::from(1u32 << 20);
    if mib >= 1024.0 {
        format!("{:.1} GiB", mib / 1024.0)
    } else {
        format!("{mib:.0} MiB")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use landspeed_core::config::Direction;

    #[test]
    fn the_estimate_grows_with_what_the_request_asks_for() {
        let base = TestSpec::default();
        let one = server_estimate(&base);
        // A default test is a few MiB.
        assert!(one < 8 << 20, "{one}");
        // The request: 32 reverse streams of 64 MiB writes is about 2 GiB of generators.
        let worst = TestSpec {
            streams: 32,
            direction: Direction::Reverse,
            length_bytes: 64 << 20,
            ..TestSpec::default()
        };
        let w = server_estimate(&worst);
        assert!((32 * (64 << 20)..3 << 30).contains(&w), "{}", human(w));
        // io_uring's queue depth multiplies each stream's buffers.
        let deep = TestSpec {
            io: IoBackend::Uring,
            queue_depth: 8,
            length_bytes: 1 << 20,
            ..TestSpec::default()
        };
        assert!(server_estimate(&deep) >= 8 << 20);
        // Receiving with verification holds a verifier beside the buffer; without, not.
        let recv = TestSpec {
            length_bytes: 8 << 20,
            ..TestSpec::default()
        };
        let unverified = TestSpec {
            verify: false,
            ..recv.clone()
        };
        assert!(server_estimate(&recv) > server_estimate(&unverified) + (7 << 20));
    }

    #[test]
    fn nothing_a_request_holds_overflows_the_estimate() {
        let huge = TestSpec {
            streams: landspeed_core::config::MAX_STREAMS,
            direction: Direction::Bidir,
            length_bytes: landspeed_core::config::MAX_LENGTH,
            io: IoBackend::Uring,
            queue_depth: 64,
            ..TestSpec::default()
        };
        assert!(server_estimate(&huge) > 1 << 40);
        assert_eq!(human(3 << 30), "3.0 GiB");
        assert_eq!(human(512 << 20), "512 MiB");
    }
}
