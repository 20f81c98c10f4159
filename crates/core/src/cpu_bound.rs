//! Whether a host's CPU, rather than the network, set a test's rate. The sign, from the reports both
//! ends send: a worker thread busy (almost) all of its time, counting the kernel's receive processing
//! (softirq) on the CPU it ran on, which is charged to the CPU and to no thread. A CPU busy with
//! another job while the thread idled did not set the rate: only the thread's own share and its CPU's
//! softirq count. Pure, so the rule is tested by hand and told the same way in every sink
//! (docs/metrics.md).

use crate::endpoint::{CpuShare, EndpointReport, Role, WorkerCpu};

/// A worker thread busy at least this share of its wall-clock time, with its CPU's softirq share, is
/// CPU-bound.
pub const THREAD_BUSY: f64 = 0.9;
/// Threads that ran for less than this are too short to judge.
const MIN_WALL_S: f64 = 0.2;

/// One line per CPU-bound worker thread of `r` (this end, named `end`: "client" or "server").
pub fn cpu_bound(end: &str, r: &EndpointReport) -> Vec<String> {
    r.workers.iter().filter_map(|w| worker_line(end, r, w)).collect()
}

/// Whether `r` had a CPU-bound worker thread with sending streams, and one with receiving streams.
pub fn bound_roles(r: &EndpointReport) -> (bool, bool) {
    (
        bound_thread(r, Role::Sender).is_some(),
        bound_thread(r, Role::Receiver).is_some(),
    )
}

/// The CPU-bound worker thread of `r` with streams in `role` that waited longest for a CPU: its
/// own busy share and its run-queue wait share of its time (0 where the kernel does not say).
pub fn bound_thread(r: &EndpointReport, role: Role) -> Option<(f64, f64)> {
    r.workers
        .iter()
        .filter(|w| {
            r.streams
                .iter()
                .any(|s| s.role == role && w.streams.contains(&s.id))
        })
        .filter_map(|w| busy(r, w).map(|(thread, _)| (thread, wait_share(w))))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

fn wait_share(w: &WorkerCpu) -> f64 {
    w.runq_wait_s.map_or(0.0, |q| q / w.wall_s)
}

/// A CPU-bound worker thread's own busy share and its CPU's figures; None when it is not bound. A
/// thread is bound when it never idled: running (its CPU's softirq counted, which is charged to no
/// thread) or ready and waiting for a CPU another thread or process held (its CPU's softirq counted
/// too when that CPU never idled).
fn busy<'a>(r: &'a EndpointReport, w: &WorkerCpu) -> Option<(f64, Option<&'a CpuShare>)> {
    if w.wall_s < MIN_WALL_S {
        return None;
    }
    let thread = (w.user_s + w.system_s) / w.wall_s;
    let cpu = w
        .last_cpu
        .and_then(|c| r.cpu.per_cpu.iter().find(|s| s.cpu == c))
        .filter(|s| s.total_s > 0.0);
    let softirq = cpu.map_or(0.0, |s| s.softirq_s / s.total_s);
    // Softirq work done while the thread was current is charged to neither its run nor its wait;
    // on a CPU with no idle time at all it counts with them.
    let cpu_full = cpu.is_some_and(|s| s.busy_s / s.total_s >= THREAD_BUSY);
    let wait = wait_share(w);
    let bound = thread + softirq >= THREAD_BUSY
        || thread + wait >= THREAD_BUSY
        || (cpu_full && thread + wait + softirq >= THREAD_BUSY);
    bound.then_some((thread, cpu))
}

fn worker_line(end: &str, r: &EndpointReport, w: &WorkerCpu) -> Option<String> {
    let (thread, cpu) = busy(r, w)?;
    let used = w.user_s + w.system_s;
    let kernel = if used > 0.0 { w.system_s / used } else { 0.0 };
    let mut text = format!(
        "{end} {} thread {:.0}% busy ({:.0}% of it in the kernel)",
        role(r, w),
        thread.min(1.0) * 100.0,
        kernel * 100.0
    );
    if wait_share(w) >= 0.05 {
        text += &format!("; it waited for a CPU {:.0}% of its time", wait_share(w) * 100.0);
    }
    if let Some(s) = cpu {
        text += &cpu_text(s);
    }
    text += ": CPU-bound, this host rather than the network set the rate";
    Some(text)
}

fn cpu_text(s: &CpuShare) -> String {
    format!(
        "; its CPU {} {:.0}% busy, {:.0}% in softirq",
        s.cpu,
        (s.busy_s / s.total_s).min(1.0) * 100.0,
        s.softirq_s / s.total_s * 100.0
    )
}

/// "sender", "receiver", or "sender and receiver" for a thread that had streams both ways.
fn role(r: &EndpointReport, w: &WorkerCpu) -> &'static str {
    let has = |role: Role| {
        r.streams
            .iter()
            .any(|s| s.role == role && w.streams.contains(&s.id))
    };
    match (has(Role::Sender), has(Role::Receiver)) {
        (true, true) => "sender and receiver",
        (false, true) => "receiver",
        _ => "sender",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assemble::tests::sr;
    use crate::config::Flow;

    fn stream(id: u32, role: Role) -> crate::endpoint::StreamReport {
        sr(id, Flow::ClientToServer, role, 1, 0, 0.0, 1.0)
    }

    fn report(worker: WorkerCpu, per_cpu: Vec<CpuShare>) -> EndpointReport {
        let mut r = EndpointReport {
            workers: vec![worker],
            streams: vec![stream(0, Role::Sender)],
            ..EndpointReport::default()
        };
        r.cpu.per_cpu = per_cpu;
        r
    }

    fn worker(user_s: f64, system_s: f64, last_cpu: Option<u32>) -> WorkerCpu {
        WorkerCpu {
            streams: vec![0],
            user_s,
            system_s,
            wall_s: 10.0,
            last_cpu,
            runq_wait_s: None,
        }
    }

    fn share(busy_s: f64, softirq_s: f64) -> CpuShare {
        CpuShare {
            cpu: 1,
            busy_s,
            system_s: busy_s - softirq_s,
            softirq_s,
            total_s: 10.0,
        }
    }

    #[test]
    fn a_busy_thread_is_cpu_bound_and_says_where_its_time_went() {
        let lines = cpu_bound(
            "client",
            &report(worker(2.9, 7.0, Some(1)), vec![share(9.9, 2.0)]),
        );
        assert_eq!(
            lines,
            ["client sender thread 99% busy (71% of it in the kernel); its CPU 1 99% busy, 20% in softirq: \
              CPU-bound, this host rather than the network set the rate"]
        );
    }

    #[test]
    fn a_saturated_cpu_counts_even_when_softirq_took_the_threads_time() {
        // The thread shows 60% because the kernel's receive work ran on its CPU as softirq.
        let lines = cpu_bound(
            "server",
            &report(worker(1.0, 5.0, Some(1)), vec![share(9.8, 3.5)]),
        );
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].starts_with("server sender thread 60% busy"),
            "{}",
            lines[0]
        );
    }

    #[test]
    fn a_cpu_busy_with_another_job_is_not_the_threads_limit() {
        // A paced sender 1% busy on a CPU another job kept 98% busy: the thread did not set the rate.
        let lines = cpu_bound(
            "client",
            &report(worker(0.05, 0.05, Some(1)), vec![share(9.8, 0.2)]),
        );
        assert!(lines.is_empty(), "{lines:?}");
    }

    #[test]
    fn an_idle_thread_on_an_idle_cpu_is_not() {
        assert!(cpu_bound(
            "client",
            &report(worker(0.5, 3.0, Some(1)), vec![share(4.0, 1.0)])
        )
        .is_empty());
        // No per-CPU figures (an older peer): the thread alone decides.
        assert!(cpu_bound("client", &report(worker(0.5, 3.0, None), vec![])).is_empty());
        let short = WorkerCpu {
            wall_s: 0.1,
            ..worker(0.0, 0.1, None)
        };
        assert!(cpu_bound("client", &report(short, vec![])).is_empty());
    }

    #[test]
    fn a_thread_that_waited_for_its_cpu_the_rest_of_its_time_is_bound() {
        // 30% busy, 65% of its time ready but another process on its CPU: it never idled.
        let w = WorkerCpu {
            runq_wait_s: Some(6.5),
            ..worker(0.5, 2.5, Some(1))
        };
        let r = report(w.clone(), vec![share(10.0, 0.1)]);
        assert!(cpu_bound("client", &r)[0].contains("waited for a CPU 65% of its time"));
        assert_eq!(bound_thread(&r, Role::Sender), Some((0.3, 0.65)));
        // The same thread that idled instead: not bound.
        let idle = WorkerCpu {
            runq_wait_s: Some(0.5),
            ..w
        };
        assert!(cpu_bound("client", &report(idle, vec![share(10.0, 0.1)])).is_empty());
    }

    #[test]
    fn roles_come_from_the_threads_streams() {
        let mut r = report(worker(9.5, 0.3, None), vec![]);
        r.streams[0].role = Role::Receiver;
        assert!(cpu_bound("server", &r)[0].starts_with("server receiver thread 98% busy"));
        r.streams.push(stream(1, Role::Sender));
        r.workers[0].streams.push(1);
        assert!(cpu_bound("server", &r)[0].starts_with("server sender and receiver thread"));
    }
}
