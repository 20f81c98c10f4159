//! What someone asked a test to be, before any default or per-stream rule: the one lowering into the
//! [`TestSpec`] both ends run. Every way a test is described (`run`'s flags, a sweep's cell, a mesh
//! file's options, and through `run`'s flags the iperf3 drop-in's command line, pScheduler's spec and
//! the exporter's probe) fills a [`TestIntent`] with what it was told and nothing else, and
//! [`TestIntent::lower`] decides the rest: the default end (10 s), the default write length for the
//! transport, a rate given for all streams or per stream turned into each stream's pace (TCP, QUIC) or
//! the senders' schedule (UDP), `--connections` raising the streams, the receive mode without
//! verification, io_uring's queue depth, and the defaults for many streams per CPU of the host that
//! runs the client. A front end that applied one of these itself would describe a different test for
//! the same words: the property test in the CLI holds them all to this one function.

use crate::config::{
    Direction, EndCondition, IoBackend, RxMode, Test, TestSpec, Transport, TxMode, DEFAULT_LENGTH,
};
use crate::tls::TlsSpec;
use crate::udp::DEFAULT_UDP_LENGTH;
use crate::units::{BitRate, Bytes};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A target rate as it was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rate {
    /// All streams of a direction together (landspeed's `-b`, a mesh file's `rate`).
    Total(BitRate),
    /// Each stream (iperf3's and pScheduler's `-b`/`bandwidth`).
    PerStream(BitRate),
}

/// A test as it was described: `None` and `false` are "not said". Serialized with a sweep's plan, so
/// that each cell is lowered again with its own streams and window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TestIntent {
    /// Streams per direction (default 1).
    pub streams: Option<u32>,
    /// QUIC: connections the streams are spread over; raises the streams to at least this.
    pub connections: Option<u32>,
    /// Bytes per write and read call (default: [`DEFAULT_LENGTH`], UDP [`DEFAULT_UDP_LENGTH`]).
    pub length: Option<Bytes>,
    /// What ends the test (default: 10 s).
    pub end: Option<EndCondition>,
    /// Warm-up left out of the results.
    pub omit: Option<Duration>,
    /// Which way the data goes.
    pub direction: Direction,
    /// SO_SNDBUF and SO_RCVBUF on every data socket.
    pub window: Option<Bytes>,
    /// Congestion control.
    pub congestion: Option<String>,
    /// TCP maximum segment size.
    pub mss: Option<u32>,
    /// TCP_NODELAY.
    pub nodelay: bool,
    /// A target rate (TCP and QUIC: each stream paced at its share; UDP: the senders' schedule).
    pub rate: Option<Rate>,
    /// Kernel pacing asked for by name, per stream (`--fq-rate`); wins over `rate` for TCP.
    pub fq_rate: Option<BitRate>,
    /// Interval between samples (default, and for zero: 1 s).
    pub interval: Option<Duration>,
    /// Worker threads on the server.
    pub server_threads: Option<u32>,
    /// CPUs the server pins its workers to.
    pub server_cpus: Option<Vec<usize>>,
    /// Do not check received bytes.
    pub no_verify: bool,
    /// How receivers take data off the socket (default: copy, or discard for an unverified TCP test).
    pub rx: Option<RxMode>,
    /// How senders hand data to the kernel.
    pub tx: TxMode,
    /// The data sockets' event loop.
    pub io: IoBackend,
    /// io_uring operations queued per stream (default 4 with io_uring, else 1).
    pub queue_depth: Option<u32>,
    /// TCP, UDP or QUIC.
    pub transport: Transport,
    /// UDP: datagrams a late sender may send back to back.
    pub burst: Option<u32>,
    /// SO_RCVLOWAT on receivers with a thread of their own.
    pub rcvlowat: Option<Bytes>,
    /// The IP TOS byte of every data packet.
    pub tos: Option<u8>,
    /// UDP over IPv4: Don't Fragment.
    pub dont_fragment: bool,
    /// Multipath TCP data connections.
    pub mptcp: bool,
    /// TLS over every TCP data connection.
    pub tls: Option<TlsSpec>,
    /// A request/response test's shape (`--rr`); None for a bulk test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactions: Option<crate::config::TransactionSpec>,
    /// Isochronous frames (`--isochronous`); None for a steady rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames: Option<crate::frames::FrameSpec>,
}

impl TestIntent {
    /// The test these words describe, for a client on a host with `client_cpus` CPUs (None: not known
    /// where the plan is made, as for a mesh, whose senders are other hosts: the defaults for many
    /// streams per CPU are then left to what was said). Not validated: [`TestIntent::validated`].
    pub fn lower(&self, client_cpus: Option<u32>) -> TestSpec {
        let streams = self.lowered_streams();
        let (fq_rate_bps, rate_bps) = self.paces(streams);
        let spec = TestSpec {
            streams,
            length_bytes: self.length.unwrap_or(self.default_length()).get(),
            end: self.end.unwrap_or(EndCondition::Time(Duration::from_secs(10))),
            omit_s: self.omit.unwrap_or_default(),
            direction: self.direction,
            window_bytes: self.window.map(Bytes::get),
            congestion: self.congestion.clone(),
            mss: self.mss,
            nodelay: self.nodelay,
            fq_rate_bps,
            interval_s: self
                .interval
                .filter(|i| !i.is_zero())
                .unwrap_or(Duration::from_secs(1)),
            server_threads: self.server_threads,
            server_cpus: self.server_cpus.clone(),
            verify: !self.no_verify,
            payload_key: 0,
            rx: self.lowered_rx(),
            tx: self.tx,
            io: self.io,
            queue_depth: self.queue_depth.unwrap_or(match self.io {
                IoBackend::Uring => 4,
                IoBackend::Epoll => 1,
            }),
            transport: self.transport,
            rate_bps,
            burst: self.burst.unwrap_or(TestSpec::default().burst),
            file: None,
            rcvlowat_bytes: self.rcvlowat.map(Bytes::get),
            tos: self.tos,
            dont_fragment: self.dont_fragment,
            mptcp: self.mptcp,
            tls: self.tls,
            connections: self.connections.unwrap_or(1),
            // The client sends its idle limit with the test (landspeed_net's client).
            idle_timeout_s: None,
            transactions: self.transactions,
            frames: self.frames,
            trip_times: false,
        };
        match client_cpus {
            Some(cpus) => spec.for_many_streams(cpus, self.length.is_some()),
            None => spec,
        }
    }

    /// [`TestIntent::lower`], validated.
    pub fn validated(&self, client_cpus: Option<u32>) -> Result<Test, crate::config::ConfigError> {
        self.lower(client_cpus).validated()
    }

    /// Streams per direction: as said (0 stays 0, for validation to refuse), at least the connections.
    fn lowered_streams(&self) -> u32 {
        let streams = self.streams.unwrap_or(1);
        match self.connections {
            Some(c) if streams > 0 => streams.max(c),
            _ => streams,
        }
    }

    fn default_length(&self) -> Bytes {
        match self.transport {
            Transport::Udp => DEFAULT_UDP_LENGTH,
            Transport::Tcp | Transport::Quic => DEFAULT_LENGTH,
        }
    }

    /// Each sending socket's pace and the UDP senders' schedule, bits per second: a rate for all
    /// streams is divided among them, a rate per stream multiplied by them, here only.
    fn paces(&self, streams: u32) -> (Option<f64>, Option<f64>) {
        let n = f64::from(streams.max(1));
        let (per_stream, total) = match self.rate {
            Some(Rate::Total(r)) => (r.bps() / n, r.bps()),
            Some(Rate::PerStream(r)) => (r.bps(), r.bps() * n),
            None => return (self.fq_rate.map(BitRate::bps), None),
        };
        match self.transport {
            Transport::Udp => (self.fq_rate.map(BitRate::bps), Some(total)),
            Transport::Tcp | Transport::Quic => (Some(self.fq_rate.map_or(per_stream, BitRate::bps)), None),
        }
    }

    /// Discard (MSG_TRUNC) when asked, or for an unverified plain TCP test; else copy.
    fn lowered_rx(&self) -> RxMode {
        let plain_tcp = self.transport == Transport::Tcp && self.tls.is_none();
        match self.rx {
            Some(rx) => rx,
            None if self.no_verify && plain_tcp => RxMode::Discard,
            None => RxMode::Copy,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_said_is_the_default_test() {
        assert_eq!(TestIntent::default().lower(None), TestSpec::default());
    }

    #[test]
    fn a_total_rate_is_shared_and_a_per_stream_rate_multiplied() {
        let total = TestIntent {
            streams: Some(4),
            rate: Some(Rate::Total(BitRate(1e9))),
            ..TestIntent::default()
        };
        assert_eq!(total.lower(None).fq_rate_bps, Some(2.5e8));
        let per = TestIntent {
            rate: Some(Rate::PerStream(BitRate(2.5e8))),
            ..total.clone()
        };
        assert_eq!(per.lower(None), total.lower(None));
        let udp = TestIntent {
            transport: Transport::Udp,
            ..per
        };
        let s = udp.lower(None);
        assert_eq!((s.rate_bps, s.fq_rate_bps), (Some(1e9), None));
        assert_eq!(s.length_bytes, DEFAULT_UDP_LENGTH.get());
    }

    #[test]
    fn kernel_pacing_by_name_wins_for_tcp() {
        let i = TestIntent {
            streams: Some(2),
            rate: Some(Rate::Total(BitRate(1e9))),
            fq_rate: Some(BitRate(1e8)),
            ..TestIntent::default()
        };
        assert_eq!(i.lower(None).fq_rate_bps, Some(1e8));
    }

    #[test]
    fn connections_raise_the_streams_and_zero_streams_stay_for_validation() {
        let i = TestIntent {
            streams: Some(2),
            connections: Some(4),
            transport: Transport::Quic,
            ..TestIntent::default()
        };
        assert_eq!((i.lower(None).streams, i.lower(None).connections), (4, 4));
        let zero = TestIntent {
            streams: Some(0),
            ..i
        };
        assert_eq!(zero.lower(None).streams, 0);
        assert!(zero.validated(None).is_err());
    }

    #[test]
    fn many_streams_take_their_defaults_only_on_a_known_host_and_when_unsaid() {
        let i = TestIntent {
            streams: Some(64),
            ..TestIntent::default()
        };
        assert_eq!(i.lower(None).length_bytes, DEFAULT_LENGTH.get());
        let here = i.lower(Some(2));
        assert_eq!(here.length_bytes, crate::config::MANY_STREAMS_LENGTH.get());
        assert_eq!(here.rcvlowat_bytes, Some(0));
        let said = TestIntent {
            length: Some(Bytes(4096)),
            ..i
        };
        assert_eq!(said.lower(Some(2)).length_bytes, 4096);
    }

    #[test]
    fn an_unverified_plain_tcp_test_discards_and_others_copy() {
        let i = TestIntent {
            no_verify: true,
            ..TestIntent::default()
        };
        assert_eq!(i.lower(None).rx, RxMode::Discard);
        let udp = TestIntent {
            transport: Transport::Udp,
            ..i.clone()
        };
        assert_eq!(udp.lower(None).rx, RxMode::Copy);
        let uring = TestIntent {
            io: IoBackend::Uring,
            ..i
        };
        assert_eq!(uring.lower(None).queue_depth, 4);
    }
}
