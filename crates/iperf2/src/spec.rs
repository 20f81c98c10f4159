//! What landspeed's server runs for an iperf 2 client's TCP header: the test as a landspeed
//! [`TestSpec`], whether its streams carry both directions on one connection, and what of the header
//! it does not serve, each named in one line (iperf 2 has no message to refuse a test with, so the
//! line goes to the server's log and the connection is closed).

use crate::header::{flags, upper, Amount, ClientHeader, Dual};
use landspeed_core::config::{Direction, EndCondition, RxMode, TestSpec, Transport};
use std::time::Duration;

/// iperf 2's TCP write size when the client gives none (`-l`): 128 KiB.
pub const DEFAULT_TCP_LEN: u64 = 128 * 1024;
/// iperf 2's request size in a bounceback test when `-l` is not given (`kDefault_BBTCPBufLen`).
pub const DEFAULT_BOUNCEBACK_LEN: u64 = 100;

/// The test for one header.
#[derive(Debug, Clone, PartialEq)]
pub struct TcpPlan {
    /// The test as landspeed runs it (nothing verified: iperf 2's payload is its own).
    pub spec: TestSpec,
    /// `--full-duplex`: each connection carries both directions (the spec is `Bidir`, its streams
    /// pairs on one socket).
    pub full_duplex: bool,
    /// What of the header is accepted but not measured yet, for the result's warnings.
    pub notes: Vec<String>,
    /// `-r` or `-d`: after or beside the client's streams (the spec's, client to server), the
    /// server opens as many connections back to the client's address at `port` and sends on each
    /// (no header, the header's amount and write size), as iperf 2's server does.
    pub connect_back: Option<ConnectBack>,
    /// `--isochronous` over TCP: each burst the client sends is a frame, counted as one.
    pub frames: bool,
}

/// The connections a `-r` or `-d` test asks the server to open back to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectBack {
    /// One after the other (`-r`) or both at once (`-d`).
    pub dual: Dual,
    /// The client's listening port (its `-L`).
    pub port: u16,
}

/// A header this server does not serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unserved {
    /// `-r` or `-d` on a server that does not connect back (`serve --connect-back` turns it on).
    #[error("iperf 2's {} asks the server to connect back to the client, which this server does only when started with --connect-back (or use -R or --full-duplex)", dual_flag(*.0))]
    ConnectBack(Dual),
    /// `-r` or `-d` over UDP.
    #[error("iperf 2's UDP {} is served only by a server started with --connect-back and --iperf2-udp-send (it sends datagrams to an address no handshake proved)", dual_flag(*.0))]
    ConnectBackUdp(Dual),
    /// `-r` or `-d` naming a port below 1024 for the server to connect back to.
    #[error("iperf 2's -r/-d asks the server to connect back to port {0}; below 1024 it is refused (a system service's port)")]
    BackPort(u16),
    /// `--permit-key`.
    #[error("iperf 2's --permit-key is not served (a keyed landspeed server takes iperf 2 only with --open iperf2)")]
    PermitKey,
    /// A UDP header on a TCP connection.
    #[error("a UDP test header on a TCP connection")]
    UdpOnTcp,
    /// No stream at all.
    #[error("an iperf 2 header asking for no streams")]
    NoStreams,
    /// A UDP test the server would send (`-R`, `--full-duplex`) and does not.
    #[error("iperf 2's UDP {0} is not served here (the server would send to an address nothing proves: `landspeed serve --iperf2-udp-send` serves it); the client-to-server test is")]
    UdpSending(&'static str),
    /// A multicast sender asks for something back (`-R`, `--full-duplex`, `-r`, `-d`).
    #[error("a multicast sender's header asks for datagrams back (-R, --full-duplex, -r or -d): nothing is sent to a group's sender")]
    ToGroup,
    /// A UDP test the server would send in datagrams too short for iperf 2's prefix and header.
    #[error("iperf 2's UDP -R or --full-duplex with -l {0}: the server sends datagrams of {MIN_SENT_UDP_LEN} bytes or more (iperf 2's prefix and header)")]
    ShortDatagrams(u32),
}

/// iperf 2's flag for a test the server opens back.
fn dual_flag(d: Dual) -> &'static str {
    match d {
        Dual::Tradeoff => "-r",
        Dual::Simultaneous => "-d",
    }
}

/// iperf 2's UDP datagram size when the client gives none (`-l`): 1,470 bytes.
pub const DEFAULT_UDP_LEN: u64 = 1470;
/// The shortest datagram a server sends an iperf 2 client (`-R`): its 16-byte prefix and the 60
/// bytes of header that follow it in every datagram of landspeed's iperf 2 sender.
pub const MIN_SENT_UDP_LEN: u32 = 76;

/// A test iperf 2's protocol cannot ask of its server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("iperf 2's protocol cannot ask for {0}")]
pub struct NotAsked(pub &'static str);

impl ClientHeader {
    /// The header a client sends for `spec` (TCP, one per stream) to a server on `port`, as iperf
    /// 2.1.8 writes it, with `VERSION2` set on every test: an iperf 2 server then sends no header
    /// ack, which a client that does not read it would leave unread when it closes (and its kernel
    /// would reset the connection). `-n` is each stream's share of the test's bytes; `--bidir` is iperf
    /// 2's `--full-duplex` (both directions on each connection).
    pub fn for_tcp(spec: &TestSpec, port: u16) -> Result<ClientHeader, NotAsked> {
        if spec.transport != Transport::Tcp {
            return Err(NotAsked("a UDP test from this client yet (TCP only)"));
        }
        let amount = match spec.end {
            EndCondition::Time(t) => {
                let cs = (t + spec.omit_s).as_millis().div_ceil(10);
                Amount::Centiseconds(u32::try_from(cs).map_err(|_| NotAsked("so long a test"))?)
            }
            EndCondition::Bytes(b) => {
                let each = b.div_ceil(u64::from(spec.streams));
                Amount::Bytes(
                    u32::try_from(each)
                        .ok()
                        .filter(|n| *n < 1 << 31)
                        .ok_or(NotAsked("2 GiB or more per stream"))?,
                )
            }
            EndCondition::Blocks(_) => return Err(NotAsked("a block count (-k); give -n or -t")),
        };
        let upper = match spec.direction {
            Direction::Forward => 0,
            Direction::Reverse => upper::REVERSE,
            Direction::Bidir => upper::FULLDUPLEX,
        } | if spec.trip_times { upper::TRIPTIME } else { 0 };
        // With trip times the header goes on with the start time (after a reserved word) and the
        // fq rate's two words, as iperf 2.1.8 writes it.
        let rest = match spec.trip_times {
            true => vec![0; 20],
            false => vec![],
        };
        let len = (crate::header::V1_BYTES + crate::header::EXTENSION_BYTES + rest.len()) as u32;
        Ok(ClientHeader {
            flags: flags::EXTEND | flags::VERSION2 | flags::LEN_BIT | len << 1,
            threads: spec.streams,
            port,
            buffer_len: u32::try_from(spec.length_bytes).map_err(|_| NotAsked("so long a write"))?,
            window_band: spec.window_bytes.map_or(0, |w| w.min(i32::MAX as u64) as i32),
            amount,
            extension: Some(crate::header::Extension {
                type_len: (0, 0),
                upper,
                lower: 0,
                version: crate::ack::SPOKEN,
                reserved: 0,
                tos: spec.tos.map_or(0, u16::from),
                rate_bps: spec.fq_rate_bps.map_or(0, |r| r as u64),
                write_prefetch: 0,
            }),
            rest,
        })
    }

    /// The header of a TCP test of isochronous frames (`--isochronous` without `-u`), as iperf
    /// 2.1.8 writes it (captured): the forward test's with the ISOCH bit and, trip times or not,
    /// the 80 bytes that hold the start time (each frame then goes as a burst, `crate::burst`). The
    /// frames' rate and sizes are not in it: each burst's header carries its period.
    pub fn for_tcp_frames(spec: &TestSpec, port: u16) -> Result<ClientHeader, NotAsked> {
        if spec.direction != Direction::Forward {
            return Err(NotAsked("frames from the server (-R, --full-duplex)"));
        }
        let timed = TestSpec {
            trip_times: true,
            ..spec.clone()
        };
        let mut h = ClientHeader::for_tcp(&timed, port)?;
        if let Some(e) = h.extension.as_mut() {
            e.upper = upper::ISOCH | if spec.trip_times { upper::TRIPTIME } else { 0 };
        }
        Ok(h)
    }

    /// The header of a test the server opens back (`-r`, `-d`: iperf 2's version-1 tests), as
    /// iperf 2.1.8 writes it: the client's streams as [`for_tcp`](Self::for_tcp) writes a
    /// forward test of `spec`, `VERSION1` instead of `VERSION2` (the server then acks the header,
    /// which the client reads), `RUN_NOW` for `-d`, and the port the client listens on.
    pub fn for_tcp_back(spec: &TestSpec, listen_port: u16, dual: Dual) -> Result<ClientHeader, NotAsked> {
        let forward = TestSpec {
            direction: Direction::Forward,
            ..spec.clone()
        };
        let mut h = ClientHeader::for_tcp(&forward, listen_port)?;
        h.flags = (h.flags & !flags::VERSION2) | flags::VERSION1;
        if dual == Dual::Simultaneous {
            h.flags |= flags::RUN_NOW;
        }
        Ok(h)
    }

    /// The header an iperf 2.1.8 UDP client puts in every datagram of a test of `amount` (time,
    /// or bytes) at `rate_bps` in `datagram_bytes`-byte datagrams to `port` (its multicast sends the
    /// same, no answer asked): 64-bit sequence numbers and the extension, one stream (the caller
    /// sets `threads` for `-P`).
    pub fn for_udp_sender(port: u16, datagram_bytes: u32, rate_bps: u64, amount: Amount) -> ClientHeader {
        // In a datagram the declared length counts the 16-byte prefix too (76 from 2.1.8).
        let len =
            (crate::udp::PREFIX_BYTES + crate::header::V1_BYTES + crate::header::EXTENSION_BYTES) as u32;
        ClientHeader {
            flags: flags::EXTEND | flags::SEQNO64B | flags::LEN_BIT | len << 1,
            threads: 1,
            port,
            buffer_len: datagram_bytes,
            window_band: 0,
            amount,
            extension: Some(crate::header::Extension {
                type_len: (0, 0),
                upper: upper::BWSET,
                lower: 0,
                version: crate::ack::SPOKEN,
                reserved: 0,
                tos: 0,
                rate_bps,
                write_prefetch: 0,
            }),
            rest: vec![],
        }
    }

    /// A UDP sender of isochronous frames (`--isochronous`): the steady sender's header with
    /// UDPTESTS, the ISOCH bit and the frame fields counted in its length (108 bytes, prefix
    /// included), as iperf 2.1.8 sends it; `rate_bps` the frames' mean.
    pub fn for_isochronous_sender(
        port: u16,
        datagram_bytes: u32,
        rate_bps: u64,
        amount: Amount,
    ) -> ClientHeader {
        let mut h = ClientHeader::for_udp_sender(port, datagram_bytes, rate_bps, amount);
        let len = crate::isoch::MIN_DATAGRAM as u32;
        h.flags = (h.flags & !flags::LEN_MASK) | flags::UDPTESTS | len << 1;
        if let Some(e) = h.extension.as_mut() {
            e.upper = upper::ISOCH;
        }
        h
    }

    /// This UDP sender's header asking for trip times (`--trip-times`), as iperf 2.1.8 sends it:
    /// UDPTESTS, the TRIPTIME bit, and the frame fields counted in its length (108 bytes, prefix
    /// included), its start time following them in each datagram.
    pub fn with_trip_times(mut self) -> ClientHeader {
        let len = crate::isoch::MIN_DATAGRAM as u32;
        self.flags = (self.flags & !flags::LEN_MASK) | flags::UDPTESTS | len << 1;
        if let Some(e) = self.extension.as_mut() {
            e.upper |= upper::TRIPTIME;
        }
        self
    }

    /// This UDP sender's header asking for no report at its end (`--no-udp-fin`), as iperf 2.1.8
    /// sends it: UDPTESTS with the NOUDPFIN bit.
    pub fn without_fin(mut self) -> ClientHeader {
        self.flags |= flags::UDPTESTS;
        if let Some(e) = self.extension.as_mut() {
            e.upper |= upper::NOUDPFIN;
        }
        self
    }

    /// The TCP test this header asks of the server, with `payload_key` for the server's own sending.
    pub fn tcp_plan(&self, payload_key: u64) -> Result<TcpPlan, Unserved> {
        let connect_back = self.dual().map(|dual| ConnectBack {
            dual,
            port: self.port,
        });
        if let Some(back) = connect_back.filter(|b| b.port < 1024) {
            return Err(Unserved::BackPort(back.port));
        }
        if self.flags & flags::KEYCHECK != 0 {
            return Err(Unserved::PermitKey);
        }
        if self.flags & (flags::UDPTESTS | flags::SEQNO64B) != 0 {
            return Err(Unserved::UdpOnTcp);
        }
        if self.threads == 0 {
            return Err(Unserved::NoStreams);
        }
        let reverse = self.flags & flags::VERSION2 != 0 && self.has(upper::REVERSE);
        let full_duplex = self.flags & flags::VERSION2 != 0 && self.has(upper::FULLDUPLEX);
        let direction = match (full_duplex, reverse) {
            (true, _) => Direction::Bidir,
            (false, true) => Direction::Reverse,
            (false, false) => Direction::Forward,
        };
        let end = match self.amount {
            // Each stream moves the amount (iperf 2's -n is per thread).
            Amount::Bytes(n) => EndCondition::Bytes(u64::from(n) * u64::from(self.threads)),
            Amount::Centiseconds(c) => EndCondition::Time(Duration::from_millis(u64::from(c) * 10)),
        };
        let rate = self.extension.map_or(0, |e| e.rate_bps);
        // --fq-rate (bytes a second) paces the server's sockets too; beside -b the lower holds.
        let fq = self.fq_rate_bytes_per_s().map(|b| b.saturating_mul(8));
        let pace = [(rate > 0).then_some(rate), fq].into_iter().flatten().min();
        // Frames come from the client only: what the server sends back is not cut into bursts.
        let frames = self.has(upper::ISOCH) && direction != Direction::Reverse;
        let bursts = self.has(upper::TRIPTIME) || frames;
        let spec = TestSpec {
            streams: self.threads,
            length_bytes: match self.buffer_len {
                0 => DEFAULT_TCP_LEN,
                n => u64::from(n),
            },
            end,
            direction,
            window_bytes: (self.window_band > 0).then_some(self.window_band as u64),
            // iperf 2's -b on TCP limits each stream, as its --fq-rate paces each socket.
            fq_rate_bps: pace.map(|p| p as f64),
            verify: false,
            payload_key,
            // Bursts are timed (and counted as frames) from the bytes themselves: they are read,
            // not dropped.
            rx: match bursts {
                true => RxMode::Copy,
                false => RxMode::Discard,
            },
            transport: Transport::Tcp,
            tos: self.extension.map(|e| e.tos as u8).filter(|t| *t != 0),
            trip_times: self.has(upper::TRIPTIME),
            // A burst is timed when its last byte is read: the reader wakes for every arrival
            // (a low-water mark would hold a burst's tail until the next burst came).
            rcvlowat_bytes: bursts.then_some(0),
            ..TestSpec::default()
        };
        Ok(TcpPlan {
            spec,
            full_duplex,
            notes: self.unmeasured(),
            connect_back,
            frames,
        })
    }

    /// The UDP stream this header (from a UDP datagram) asks the server to receive: one stream (each
    /// of iperf 2's `-P` UDP streams is a test of its own here), at the header's rate (its default
    /// 1 Mbit/s is sent), for its time or bytes. A test the server would send (`-R`) is refused.
    pub fn udp_plan(&self, payload_key: u64) -> Result<TestSpec, Unserved> {
        self.udp_plan_sending(payload_key, false)
    }

    /// A UDP `-r` or `-d` header's test, when the server answers them: the client's stream the
    /// server receives (`Forward`), and the stream it sends back to the client's `-L` port in a
    /// test of its own (`ConnectBack`); a port below 1024 is refused.
    pub fn udp_plan_back(&self, payload_key: u64) -> Result<(TestSpec, Option<ConnectBack>), Unserved> {
        let Some(dual) = self.dual() else {
            return self.udp_plan_sending(payload_key, true).map(|s| (s, None));
        };
        if self.port < 1024 {
            return Err(Unserved::BackPort(self.port));
        }
        let mut one_way = self.clone();
        // The header without its dual flags: what the client's own stream asks.
        one_way.flags &= !(flags::VERSION1 | flags::RUN_NOW);
        let spec = one_way.udp_plan_sending(payload_key, false)?;
        Ok((
            spec,
            Some(ConnectBack {
                dual,
                port: self.port,
            }),
        ))
    }

    /// `udp_plan`, with `-R` and `--full-duplex` served when `send` (the server's stream then goes
    /// to the client, `Direction::Reverse` or `Bidir`; its datagrams must hold iperf 2's 16-byte
    /// prefix).
    pub fn udp_plan_sending(&self, payload_key: u64, send: bool) -> Result<TestSpec, Unserved> {
        let v2 = self.flags & flags::VERSION2 != 0;
        let both = v2 && self.has(upper::FULLDUPLEX);
        if both && !send {
            return Err(Unserved::UdpSending("--full-duplex"));
        }
        let reverse = v2 && self.has(upper::REVERSE) && !both;
        if reverse && !send {
            return Err(Unserved::UdpSending("-R"));
        }
        if (reverse || both) && self.buffer_len != 0 && self.buffer_len < MIN_SENT_UDP_LEN {
            return Err(Unserved::ShortDatagrams(self.buffer_len));
        }
        if let Some(d) = self.dual() {
            return Err(Unserved::ConnectBackUdp(d));
        }
        if self.flags & flags::KEYCHECK != 0 {
            return Err(Unserved::PermitKey);
        }
        let end = match self.amount {
            Amount::Bytes(n) => EndCondition::Bytes(u64::from(n)),
            Amount::Centiseconds(c) => EndCondition::Time(Duration::from_millis(u64::from(c) * 10)),
        };
        let rate = self.extension.map_or(0, |e| e.rate_bps);
        Ok(TestSpec {
            streams: 1,
            length_bytes: match self.buffer_len {
                0 => DEFAULT_UDP_LEN,
                n => u64::from(n),
            },
            end,
            direction: match (reverse, both) {
                (_, true) => Direction::Bidir,
                (true, _) => Direction::Reverse,
                _ => Direction::Forward,
            },
            verify: false,
            payload_key,
            transport: Transport::Udp,
            rate_bps: Some(if rate > 0 {
                rate as f64
            } else {
                landspeed_core::config::DEFAULT_UDP_RATE_BPS
            }),
            tos: self.extension.map(|e| e.tos as u8).filter(|t| *t != 0),
            // The datagrams carry their send times anyway; the flag says the clocks agree.
            trip_times: self.has(upper::TRIPTIME),
            ..TestSpec::default()
        })
    }

    /// What the header asks for that the server counts as plain bytes for now.
    fn unmeasured(&self) -> Vec<String> {
        [(
            upper::PERIODICBURST,
            "--burst-period: the bursts are counted as bytes; their latency is not read yet",
        )]
        .into_iter()
        .filter(|(bit, _)| self.has(*bit))
        .map(|(_, note)| note.to_string())
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::tests::tcp;

    #[test]
    fn each_captured_tcp_command_line_becomes_its_test() {
        let p = tcp("tcp -n 8K").tcp_plan(7).unwrap();
        assert_eq!(p.spec.direction, Direction::Forward);
        assert_eq!(p.spec.end, EndCondition::Bytes(8192));
        assert_eq!(p.spec.length_bytes, DEFAULT_TCP_LEN);
        assert!(!p.spec.verify && !p.full_duplex && p.notes.is_empty());
        assert!(p.spec.clone().validated().is_ok());

        let p = tcp("tcp -t 1 -b 1M").tcp_plan(7).unwrap();
        assert_eq!(p.spec.end, EndCondition::Time(Duration::from_secs(1)));
        assert_eq!(p.spec.fq_rate_bps, Some(1_048_576.0));

        let p = tcp("tcp -n 8K -l 1000 -P 2").tcp_plan(7).unwrap();
        assert_eq!((p.spec.streams, p.spec.length_bytes), (2, 1000));
        assert_eq!(p.spec.end, EndCondition::Bytes(16384), "-n is each stream's");

        let p = tcp("tcp -n 8K -R").tcp_plan(7).unwrap();
        assert_eq!(p.spec.direction, Direction::Reverse);
        let p = tcp("tcp -n 8K --full-duplex").tcp_plan(7).unwrap();
        assert_eq!(p.spec.direction, Direction::Bidir);
        assert!(p.full_duplex);
        assert_eq!(p.spec.total_streams(), 2);

        let p = tcp("tcp -n 8K --trip-times").tcp_plan(7).unwrap();
        assert!(p.notes.is_empty() && p.spec.trip_times);
        assert_eq!(p.spec.rx, RxMode::Copy, "the bursts are read");
    }

    #[test]
    fn a_tcp_frame_senders_header_is_iperf_2s_with_version2() {
        // iperf 2.1.8's `-t 1 --isochronous=10:200k,0`: ISOCH, 80 bytes (the start time), no
        // rate; landspeed's sets VERSION2 as on every test (no ack to leave unread).
        let theirs = tcp("tcp -t 1 --isochronous=10:200k,0");
        assert!(theirs.has(upper::ISOCH) && !theirs.has(upper::TRIPTIME));
        let spec = TestSpec {
            end: EndCondition::Time(Duration::from_secs(1)),
            length_bytes: 0,
            ..TestSpec::default()
        };
        let start = crate::ack::WireTime {
            secs: 0x6b1495cd,
            micros: 0xdbaa8,
        };
        let mut ours = ClientHeader::for_tcp_frames(&spec, 5302).unwrap().started(start);
        assert_eq!(ours.flags, theirs.flags | flags::VERSION2);
        ours.flags = theirs.flags;
        ours.extension.as_mut().unwrap().version = theirs.extension.unwrap().version;
        assert_eq!(ours.encode(), theirs.encode());
        let timed = TestSpec {
            trip_times: true,
            ..spec.clone()
        };
        let h = ClientHeader::for_tcp_frames(&timed, 5302).unwrap();
        assert!(h.has(upper::ISOCH) && h.has(upper::TRIPTIME));
        let back = TestSpec {
            direction: Direction::Reverse,
            ..spec
        };
        assert!(ClientHeader::for_tcp_frames(&back, 5302).is_err());
    }

    #[test]
    fn a_tcp_frame_senders_header_has_its_bursts_read_and_counted_as_frames() {
        let p = tcp("tcp -t 1 --isochronous=10:200k,0").tcp_plan(7).unwrap();
        assert!(p.frames && !p.spec.trip_times);
        assert_eq!((p.spec.rx, p.spec.rcvlowat_bytes), (RxMode::Copy, Some(0)));
        let plain = tcp("tcp -t 1 -b 1M").tcp_plan(7).unwrap();
        assert!(!plain.frames);
        assert_eq!(
            (plain.spec.rx, plain.spec.rcvlowat_bytes),
            (RxMode::Discard, None)
        );
    }

    #[test]
    fn r_and_d_become_the_clients_streams_and_connections_back() {
        for (name, dual) in [
            ("tcp -n 8K -r", Dual::Tradeoff),
            ("tcp -n 8K -d", Dual::Simultaneous),
        ] {
            let h = tcp(name);
            let p = h.tcp_plan(7).unwrap();
            assert_eq!(p.connect_back, Some(ConnectBack { dual, port: 5999 }), "{name}");
            assert_eq!(
                p.spec.direction,
                Direction::Forward,
                "{name}: the client's streams"
            );
            assert_eq!(p.spec.end, EndCondition::Bytes(8192));
            assert!(
                crate::ack::HeaderAck::wanted(&h),
                "{name}: iperf 2's server acks it"
            );
            // Written as iperf 2.1.8 wrote it (the capture's client listened on 5999).
            let spec = TestSpec {
                end: EndCondition::Bytes(8192),
                length_bytes: 0,
                ..TestSpec::default()
            };
            let mut mine = ClientHeader::for_tcp_back(&spec, 5999, dual).unwrap();
            mine.extension.as_mut().unwrap().version = h.extension.unwrap().version;
            assert_eq!(mine.encode(), h.encode(), "{name}");
        }
        assert_eq!(tcp("tcp -n 8K").tcp_plan(7).unwrap().connect_back, None);
    }

    #[test]
    fn a_udp_header_becomes_one_received_stream() {
        let (_, h) = crate::header::tests::udp("udp -u -t 1 -b 100K -l 200");
        let spec = h.udp_plan(1).unwrap();
        assert_eq!((spec.streams, spec.length_bytes), (1, 200));
        assert_eq!(spec.rate_bps, Some(102_400.0));
        assert_eq!(spec.end, EndCondition::Time(Duration::from_secs(1)));
        assert_eq!(spec.transport, Transport::Udp);
        assert!(spec.validated().is_ok());
        let (_, h) = crate::header::tests::udp("udp -u -n 4K");
        assert_eq!(h.udp_plan(1).unwrap().end, EndCondition::Bytes(4096));
        let mut r = h.clone();
        r.flags |= flags::VERSION2;
        r.extension.as_mut().unwrap().upper |= upper::REVERSE;
        assert_eq!(r.udp_plan(1), Err(Unserved::UdpSending("-R")));
        let sent = r.udp_plan_sending(1, true).unwrap();
        assert_eq!(sent.direction, Direction::Reverse);
        assert!(sent.validated().is_ok());
        assert_eq!(h.udp_plan_sending(1, true).unwrap().direction, Direction::Forward);
        r.buffer_len = 60;
        assert_eq!(r.udp_plan_sending(1, true), Err(Unserved::ShortDatagrams(60)));
        let mut both = h.clone();
        both.flags |= flags::VERSION2;
        both.extension.as_mut().unwrap().upper |= upper::FULLDUPLEX;
        assert_eq!(
            both.udp_plan_sending(1, false),
            Err(Unserved::UdpSending("--full-duplex"))
        );
        let bidir = both.udp_plan_sending(1, true).unwrap();
        assert_eq!((bidir.direction, bidir.streams), (Direction::Bidir, 1));
        assert!(bidir.validated().is_ok());
        both.buffer_len = 60;
        assert_eq!(both.udp_plan_sending(1, true), Err(Unserved::ShortDatagrams(60)));
    }

    #[test]
    fn a_clients_header_asks_an_iperf2_server_for_the_same_test() {
        for (direction, streams, end) in [
            (Direction::Forward, 1, EndCondition::Time(Duration::from_secs(3))),
            (Direction::Reverse, 4, EndCondition::Bytes(4 << 20)),
            (
                Direction::Bidir,
                2,
                EndCondition::Time(Duration::from_millis(1500)),
            ),
        ] {
            let spec = TestSpec {
                direction,
                streams,
                end,
                length_bytes: 65536,
                ..TestSpec::default()
            };
            let h = ClientHeader::for_tcp(&spec, 5001).unwrap();
            assert!(!crate::ack::HeaderAck::wanted(&h), "no ack asked");
            let (back, used) = ClientHeader::parse(&h.encode(), 0).unwrap();
            assert_eq!((back.clone(), used), (h, 60));
            let plan = back.tcp_plan(0).unwrap();
            assert_eq!(
                (plan.spec.direction, plan.spec.streams, plan.spec.end),
                (direction, streams, end)
            );
            assert_eq!(plan.spec.length_bytes, 65536);
        }
        let blocks = TestSpec {
            end: EndCondition::Blocks(3),
            ..TestSpec::default()
        };
        assert!(ClientHeader::for_tcp(&blocks, 1).is_err());
    }

    #[test]
    fn what_is_not_served_is_named() {
        let e = Unserved::ConnectBack(Dual::Simultaneous).to_string();
        assert!(
            e.contains("-d asks the server to connect back") && e.contains("--connect-back"),
            "{e}"
        );
        let mut low = tcp("tcp -n 8K -d");
        low.port = 80;
        assert_eq!(low.tcp_plan(0), Err(Unserved::BackPort(80)));
        let (_, udp) = crate::header::tests::udp("udp -u -n 4K -r");
        assert_eq!(udp.udp_plan(0), Err(Unserved::ConnectBackUdp(Dual::Tradeoff)));
        let (spec, back) = udp.udp_plan_back(0).unwrap();
        assert_eq!(spec.direction, Direction::Forward);
        assert_eq!(back.map(|b| b.dual), Some(Dual::Tradeoff));
        assert!(spec.validated().is_ok());
        let mut low = udp.clone();
        low.port = 80;
        assert_eq!(low.udp_plan_back(0), Err(Unserved::BackPort(80)));
        let mut h = tcp("tcp -n 8K");
        h.flags |= flags::KEYCHECK;
        assert_eq!(h.tcp_plan(0), Err(Unserved::PermitKey));
        let mut h = tcp("tcp -n 8K");
        h.flags |= flags::SEQNO64B;
        assert_eq!(h.tcp_plan(0), Err(Unserved::UdpOnTcp));
        let mut h = tcp("tcp -n 8K");
        h.threads = 0;
        assert_eq!(h.tcp_plan(0), Err(Unserved::NoStreams));
    }

    #[test]
    fn a_udp_senders_header_is_read_back_as_iperf_2_1_8s_multicast_client_writes_it() {
        let h = ClientHeader::for_udp_sender(5001, 1470, 1_000_000, Amount::Centiseconds(200));
        let header = h.encode();
        // iperf 2.1.8's multicast client's first word and amount (a capture of `-t 2 -b 1M`).
        assert_eq!(&header[..4], &0x4801_0098u32.to_be_bytes());
        assert_eq!(h.amount, Amount::Centiseconds(200));
        let mut datagram = crate::udp::Datagram {
            seq: 1,
            sent_s: 1,
            sent_us: 2,
        }
        .encode(true)
        .to_vec();
        datagram.extend_from_slice(&header);
        datagram.resize(1470, 0);
        let (d, read) = crate::detect::udp(&datagram).expect("read as iperf 2's");
        assert_eq!((d.seq, read), (1, h));
    }
}
