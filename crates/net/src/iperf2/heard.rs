//! The streams an iperf 2 UDP client receives (UDP `--full-duplex`'s, `-d`'s and `-r`'s), shown
//! while the test runs: their readers close an interval's sample on threads of their own, and the
//! client shows each beside the engine's interval of the same number (or as it comes, when this end
//! sends nothing), then keeps them all for the result's samples.

use crate::dial::{ClientEvent, LiveIntervals};
use landspeed_core::config::Test;
use landspeed_core::endpoint::{IntervalSample, StreamSample};
use std::sync::mpsc::Receiver;

/// The received streams' samples: those not shown yet, and all of them.
pub(super) struct Heard<'a> {
    /// The test whose flows the samples' stream ids name.
    spec: &'a Test,
    samples: Receiver<(u32, StreamSample)>,
    live: LiveIntervals,
    pending: Vec<(u32, StreamSample)>,
    /// Every sample that came, in the order it came.
    pub(super) received: Vec<(u32, StreamSample)>,
}

impl<'a> Heard<'a> {
    /// The samples `samples` brings, of `spec`'s streams.
    pub(super) fn new(spec: &'a Test, samples: Receiver<(u32, StreamSample)>) -> Heard<'a> {
        Heard {
            spec,
            samples,
            live: LiveIntervals::default(),
            pending: vec![],
            received: vec![],
        }
    }

    /// Waits up to `wait` for a sample, then shows every one that has come.
    pub(super) fn show_waiting(&mut self, wait: std::time::Duration, on_event: &mut dyn FnMut(ClientEvent)) {
        if let Ok(x) = self.samples.recv_timeout(wait) {
            self.received.push(x.clone());
            self.pending.push(x);
        }
        self.show(None, on_event);
    }

    /// Shows the samples of intervals up to `upto` that have come (all of them with None), each
    /// interval's as one event a flow.
    pub(super) fn show(&mut self, upto: Option<u32>, on_event: &mut dyn FnMut(ClientEvent)) {
        for x in self.samples.try_iter() {
            self.received.push(x.clone());
            self.pending.push(x);
        }
        let mut due: Vec<(u32, StreamSample)> = vec![];
        self.pending.retain(|(i, s)| {
            let now = upto.is_none_or(|u| *i <= u);
            if now {
                due.push((*i, s.clone()));
            }
            !now
        });
        for sample in samples(due, self.spec) {
            self.live.each_flow(self.spec, &sample, on_event);
        }
    }
}

/// Samples grouped into intervals, in order (interval `k` spans `k`..`k + 1` of the spec's
/// interval).
fn samples(mut due: Vec<(u32, StreamSample)>, spec: &Test) -> Vec<IntervalSample> {
    due.sort_by_key(|(i, s)| (*i, s.id));
    let step = spec.interval_s.as_secs_f64();
    let mut out: Vec<IntervalSample> = vec![];
    for (index, s) in due {
        match out.last_mut() {
            Some(last) if last.index == index => last.streams.push(s),
            _ => out.push(IntervalSample {
                index,
                start_s: f64::from(index) * step,
                end_s: f64::from(index + 1) * step,
                omitted: false,
                streams: vec![s],
            }),
        }
    }
    out
}

/// The engine's samples of the streams sent, each with the received streams' samples of the same
/// interval; intervals only received in come as their own.
pub(super) fn merged(
    sent: &[IntervalSample],
    received: &[(u32, StreamSample)],
    spec: &Test,
) -> Vec<IntervalSample> {
    let mut out = sent.to_vec();
    for r in samples(received.to_vec(), spec) {
        match out.iter_mut().find(|i| i.index == r.index) {
            Some(i) => i.streams.extend(r.streams),
            None => out.push(r),
        }
    }
    out.sort_by_key(|i| i.index);
    out
}
