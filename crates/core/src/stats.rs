//! Interval statistics: when samples are taken, how cumulative samples become interval byte counts, and
//! the peak and lowest interval rates quoted next to the average. Samples are cumulative byte counters,
//! so intervals add up to the totals by construction (the last sample is taken after the last byte).

use crate::endpoint::IntervalSample;
use std::time::Duration;

/// The instants (seconds since a side's start) at which intervals close. During a warm-up of `omit`
/// seconds intervals run every `interval` and one closes exactly at the end of the warm-up; after it,
/// intervals restart from that instant, so measured intervals never straddle the warm-up boundary.
#[derive(Debug, Clone)]
pub struct SampleSchedule {
    interval: f64,
    omit: f64,
    omit_index: u32,
    index: u32,
    in_omit: bool,
}

impl SampleSchedule {
    /// Samples every `interval`, the first ones inside the warm-up `omit` marked.
    pub fn new(interval: Duration, omit: Duration) -> Self {
        let interval = interval.as_secs_f64().max(1e-3);
        let omit = omit.as_secs_f64();
        SampleSchedule {
            interval,
            omit,
            omit_index: 0,
            index: 0,
            in_omit: omit > 0.0,
        }
    }

    /// The next interval.
    pub fn next_interval(&mut self) -> Interval {
        let index = self.index;
        self.index += 1;
        let k = self.omit_index as f64;
        self.omit_index += 1;
        if self.in_omit {
            let (start_s, end_s) = (k * self.interval, (k + 1.0) * self.interval);
            if end_s >= self.omit - 1e-9 {
                self.in_omit = false;
                self.omit_index = 0;
                return Interval::new(index, start_s, self.omit, true);
            }
            return Interval::new(index, start_s, end_s, true);
        }
        let (start_s, end_s) = (
            self.omit + k * self.interval,
            self.omit + (k + 1.0) * self.interval,
        );
        Interval::new(index, start_s, end_s, false)
    }
}

/// One interval of a [`SampleSchedule`]: seconds since the side's start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// The interval's number, from 0.
    pub index: u32,
    /// Its start.
    pub start_s: f64,
    /// Its end.
    pub end_s: f64,
    /// The interval lies in the warm-up (`-O`), and is not counted.
    pub omitted: bool,
}

impl Interval {
    /// Interval `index` from `start_s` to `end_s`, in the warm-up when `omitted`.
    pub fn new(index: u32, start_s: f64, end_s: f64, omitted: bool) -> Self {
        Interval {
            index,
            start_s,
            end_s,
            omitted,
        }
    }
}

/// One interval's bytes for one stream, derived from two cumulative samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StreamDelta {
    /// The stream.
    pub id: u32,
    /// Bytes it moved in the interval.
    pub bytes: u64,
    /// A UDP receiver's datagrams in the interval: (sent as the sequence numbers say, lost): those found
    /// missing within it, less those of its own gaps that arrived late within it.
    pub datagrams: Option<(u64, u64)>,
    /// A TCP receiver's reads in the interval, where they are counted.
    pub reads: Option<crate::endpoint::ReadBins>,
}

/// Converts cumulative samples into per-interval byte deltas, stream by stream. Streams are matched by
/// id; a stream missing from the previous sample starts from zero.
pub fn deltas(samples: &[IntervalSample]) -> Vec<Vec<StreamDelta>> {
    type Last = (
        u64,
        Option<crate::endpoint::UdpCounts>,
        Option<crate::endpoint::ReadBins>,
    );
    let mut last: std::collections::HashMap<u32, Last> = std::collections::HashMap::new();
    samples
        .iter()
        .map(|s| {
            s.streams
                .iter()
                .map(|st| {
                    let (prev, prev_udp, prev_reads) = last
                        .insert(st.id, (st.bytes, st.udp.clone(), st.reads))
                        .unwrap_or_default();
                    let datagrams = st.udp.as_ref().map(|u| {
                        let p = prev_udp.unwrap_or_default();
                        (
                            u.expected.saturating_sub(p.expected),
                            u.missing().saturating_sub(p.missing()),
                        )
                    });
                    StreamDelta {
                        id: st.id,
                        bytes: st.bytes.saturating_sub(prev),
                        datagrams,
                        reads: st.reads.map(|r| r.since(prev_reads.as_ref())),
                    }
                })
                .collect()
        })
        .collect()
}

/// Peak and lowest rates (bit/s) over intervals that are measured (not warm-up) and at least 90% of the
/// nominal interval long, so a short final interval does not pose as the lowest. `None` when no interval
/// qualifies.
pub fn peak_and_lowest(intervals: &[(f64, f64, u64, bool)], nominal: f64) -> Option<(f64, f64)> {
    let rates: Vec<f64> = intervals
        .iter()
        .filter(|(s, e, _, omitted)| !omitted && (e - s) >= 0.9 * nominal && e > s)
        .map(|(s, e, b, _)| *b as f64 * 8.0 / (e - s))
        .collect();
    if rates.is_empty() {
        return None;
    }
    let peak = rates.iter().cloned().fold(f64::MIN, f64::max);
    let low = rates.iter().cloned().fold(f64::MAX, f64::min);
    Some((peak, low))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::StreamSample;

    #[test]
    fn schedule_without_omit() {
        let mut s = SampleSchedule::new(Duration::from_secs(1), Duration::ZERO);
        assert_eq!(s.next_interval(), Interval::new(0, 0.0, 1.0, false));
        assert_eq!(s.next_interval(), Interval::new(1, 1.0, 2.0, false));
    }

    #[test]
    fn schedule_restarts_after_omit() {
        let mut s = SampleSchedule::new(Duration::from_secs(1), Duration::from_millis(2500));
        assert_eq!(s.next_interval(), Interval::new(0, 0.0, 1.0, true));
        assert_eq!(s.next_interval(), Interval::new(1, 1.0, 2.0, true));
        assert_eq!(s.next_interval(), Interval::new(2, 2.0, 2.5, true));
        assert_eq!(s.next_interval(), Interval::new(3, 2.5, 3.5, false));
        assert_eq!(s.next_interval(), Interval::new(4, 3.5, 4.5, false));
    }

    #[test]
    fn deltas_sum_to_last_cumulative() {
        let mk = |i: u32, a: u64, b: u64| IntervalSample {
            index: i,
            start_s: i as f64,
            end_s: i as f64 + 1.0,
            omitted: false,
            streams: vec![
                StreamSample {
                    id: 0,
                    bytes: a,
                    tcp: None,
                    udp: None,
                    reads: None,
                    trips: None,
                    trip_bins: None,
                },
                StreamSample {
                    id: 1,
                    bytes: b,
                    tcp: None,
                    udp: None,
                    reads: None,
                    trips: None,
                    trip_bins: None,
                },
            ],
        };
        let samples = vec![mk(0, 10, 5), mk(1, 25, 5), mk(2, 40, 9)];
        let d = deltas(&samples);
        let s0: u64 = d.iter().map(|v| v[0].bytes).sum();
        let s1: u64 = d.iter().map(|v| v[1].bytes).sum();
        assert_eq!((s0, s1), (40, 9));
    }

    /// Stream 0 with `bytes` and nothing else.
    fn stream0(bytes: u64) -> StreamSample {
        StreamSample::of_bytes(0, bytes)
    }

    /// Interval `i` (a second long) holding `stream` alone.
    fn one_stream(i: u32, stream: StreamSample) -> IntervalSample {
        IntervalSample {
            index: i,
            start_s: i as f64,
            end_s: i as f64 + 1.0,
            omitted: false,
            streams: vec![stream],
        }
    }

    #[test]
    fn read_deltas_are_each_intervals_reads() {
        use crate::endpoint::ReadBins;
        let mk = |i: u32, bins: [u64; 8]| {
            let reads = Some(ReadBins {
                width_bytes: 16_384,
                bins,
            });
            one_stream(i, StreamSample { reads, ..stream0(0) })
        };
        let d = deltas(&[mk(0, [1, 0, 0, 2, 0, 0, 0, 10]), mk(1, [1, 1, 0, 5, 0, 0, 0, 30])]);
        let second = d[1][0].reads.unwrap();
        assert_eq!(second.bins, [0, 1, 0, 3, 0, 0, 0, 20]);
        assert_eq!((second.reads(), second.width_bytes), (24, 16_384));
        assert_eq!(d[0][0].reads.unwrap().reads(), 13);
        // A read's bin: (n - 1) / width, the whole buffer in the last.
        assert_eq!(
            [1, 16_384, 16_385, 131_072, 1 << 30].map(|n| ReadBins::bin(16_384, n)),
            [0, 0, 1, 7, 7]
        );
    }

    #[test]
    fn udp_deltas_count_each_intervals_datagrams_and_new_gaps() {
        use crate::endpoint::UdpCounts;
        let mk = |i: u32, expected: u64, received: u64| {
            let udp = Some(UdpCounts {
                expected,
                received,
                jitter_ms: None,
                transit: None,
                frames: None,
            });
            one_stream(
                i,
                StreamSample {
                    udp,
                    ..stream0(received * 100)
                },
            )
        };
        // 100 sent, 3 missing; then 100 more with one more gap; then 50 more, none missing, and two
        // of the old gaps filled late: that interval lost none (never fewer than none).
        let d = deltas(&[mk(0, 100, 97), mk(1, 200, 196), mk(2, 250, 248)]);
        let got: Vec<_> = d.iter().map(|v| v[0].datagrams).collect();
        assert_eq!(got, [Some((100, 3)), Some((100, 1)), Some((50, 0))]);
        let tcp = deltas(&samples_without_udp());
        assert!(tcp.iter().all(|v| v[0].datagrams.is_none()));
    }

    fn samples_without_udp() -> Vec<IntervalSample> {
        vec![IntervalSample {
            index: 0,
            start_s: 0.0,
            end_s: 1.0,
            omitted: false,
            streams: vec![StreamSample {
                id: 0,
                bytes: 1,
                tcp: None,
                udp: None,
                reads: None,
                trips: None,
                trip_bins: None,
            }],
        }]
    }

    #[test]
    fn peak_ignores_short_and_omitted() {
        let iv = vec![
            (0.0, 1.0, 1000, true),
            (1.0, 2.0, 100, false),
            (2.0, 3.0, 200, false),
            (3.0, 3.1, 1, false),
        ];
        assert_eq!(peak_and_lowest(&iv, 1.0), Some((1600.0, 800.0)));
        assert_eq!(peak_and_lowest(&iv[..1], 1.0), None);
    }
}
