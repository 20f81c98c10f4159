//! CPU accounting for a test: this process's user and system time (getrusage), each worker thread's
//! (RUSAGE_THREAD), and the whole machine's and each CPU's busy, system and softirq time (/proc/stat),
//! snapshotted before and after, plus the clock rate used to turn CPU-seconds into cycles per byte.
//! docs/metrics.md says how each figure is derived.

use landspeed_core::endpoint::{CgroupCpu, CpuShare, CpuTimes, WorkerCpu};
use std::time::Instant;

/// A machine's or one CPU's time, in the system's ticks.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemTicks {
    /// Not idle (nor waiting for I/O).
    pub busy: u64,
    /// In the kernel.
    pub system: u64,
    /// Handling soft interrupts (Linux only).
    pub softirq: u64,
    /// Stolen by the hypervisor for other guests (Linux only).
    pub steal: u64,
    /// All of it.
    pub total: u64,
}

/// One /proc/stat CPU line's counters (after the name).
fn line_ticks(fields: &str) -> SystemTicks {
    // user nice system idle iowait irq softirq steal guest guest_nice
    let v: Vec<u64> = fields.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    let get = |i: usize| v.get(i).copied().unwrap_or(0);
    // guest time is already counted in user; leave it out of the total.
    let total: u64 = (0..8).map(get).sum();
    let idle = get(3) + get(4);
    SystemTicks {
        busy: total.saturating_sub(idle),
        system: get(2),
        softirq: get(6),
        steal: get(7),
        total,
    }
}

/// The machine's ticks ("cpu" line) and each CPU's ("cpuN" lines) in /proc/stat's text, in its order.
pub fn parse_proc_stat(text: &str) -> (SystemTicks, Vec<(u32, SystemTicks)>) {
    let mut all = SystemTicks::default();
    let mut each = vec![];
    for line in text.lines().filter(|l| l.starts_with("cpu")) {
        let (name, fields) = line.split_once(' ').unwrap_or((line, ""));
        match name[3..].parse::<u32>() {
            Ok(n) => each.push((n, line_ticks(fields))),
            Err(_) => all = line_ticks(fields),
        }
    }
    (all, each)
}

use crate::os::{process_times, thread_times};

/// A worker thread's CPU clock, started on that thread.
pub struct ThreadClock {
    at: Instant,
    user: f64,
    system: f64,
    waited: Option<f64>,
}

impl ThreadClock {
    /// Starts counting on the calling thread.
    pub fn start() -> Self {
        let (user, system) = thread_times();
        ThreadClock {
            at: Instant::now(),
            user,
            system,
            waited: crate::os::thread_runq_wait_s(),
        }
    }

    /// What the calling thread (the one that started it) used since, for `streams`.
    pub fn stop(self, streams: Vec<u32>) -> WorkerCpu {
        let (user, system) = thread_times();
        WorkerCpu {
            streams,
            user_s: (user - self.user).max(0.0),
            system_s: (system - self.system).max(0.0),
            wall_s: self.at.elapsed().as_secs_f64(),
            last_cpu: crate::os::current_cpu(),
            runq_wait_s: self
                .waited
                .zip(crate::os::thread_runq_wait_s())
                .map(|(a, b)| (b - a).max(0.0)),
        }
    }
}

/// CPUs this process may use at once (a cgroup quota or an affinity mask counts): how many
/// threads are worth running. The host's own count is [`crate::os::cpus_online`].
pub fn cpu_count() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
}

/// The nominal clock rate: cpufreq's maximum if the kernel exposes it, else /proc/cpuinfo's "cpu MHz".
pub fn clock_rate() -> Option<(f64, String)> {
    if let Ok(s) = crate::os::kernel_file("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq") {
        if let Ok(khz) = s.trim().parse::<f64>() {
            return Some((khz * 1e3, "cpufreq cpuinfo_max_freq".into()));
        }
    }
    let text = crate::os::kernel_file("/proc/cpuinfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("cpu MHz"))?;
    let mhz: f64 = line.split(':').nth(1)?.trim().parse().ok()?;
    Some((mhz * 1e6, "/proc/cpuinfo cpu MHz".into()))
}

/// A point-in-time reading of the counters.
#[derive(Debug, Clone)]
pub struct CpuSnapshot {
    at: Instant,
    user: f64,
    system: f64,
    ticks: SystemTicks,
    per_cpu: Vec<(u32, SystemTicks)>,
    hz: f64,
    cgroup: Option<CgroupTicks>,
}

impl CpuSnapshot {
    /// This process's CPU times and the host's CPU ticks now.
    pub fn take() -> Self {
        let (user, system) = process_times();
        let (ticks, per_cpu, hz) = crate::os::system_ticks();
        CpuSnapshot {
            at: Instant::now(),
            user,
            system,
            ticks,
            per_cpu,
            hz,
            cgroup: crate::os::cgroup_cpu(),
        }
    }

    /// CPU time used between `self` and a later snapshot.
    pub fn until(&self, later: &CpuSnapshot) -> CpuTimes {
        let hz = self.hz;
        let d = |a: u64, b: u64| b.saturating_sub(a) as f64 / hz;
        let clock = clock_rate();
        CpuTimes {
            wall_s: later.at.duration_since(self.at).as_secs_f64(),
            process_user_s: (later.user - self.user).max(0.0),
            process_system_s: (later.system - self.system).max(0.0),
            system_busy_s: d(self.ticks.busy, later.ticks.busy),
            system_softirq_s: d(self.ticks.softirq, later.ticks.softirq),
            system_total_s: d(self.ticks.total, later.ticks.total),
            cpus: crate::os::cpus_online(),
            clock_hz: clock.as_ref().map(|c| c.0),
            clock_source: clock.map(|c| c.1),
            per_cpu: self.per_cpu_until(later, hz),
            system_steal_s: d(self.ticks.steal, later.ticks.steal),
            cgroup: self
                .cgroup
                .as_ref()
                .zip(later.cgroup.as_ref())
                .and_then(|(a, b)| a.until(b)),
        }
    }

    /// Each CPU present in both snapshots, its seconds between them.
    fn per_cpu_until(&self, later: &CpuSnapshot, hz: f64) -> Vec<CpuShare> {
        let d = |a: u64, b: u64| b.saturating_sub(a) as f64 / hz;
        self.per_cpu
            .iter()
            .filter_map(|(n, a)| {
                let (_, b) = later.per_cpu.iter().find(|(m, _)| m == n)?;
                Some(CpuShare {
                    cpu: *n,
                    busy_s: d(a.busy, b.busy),
                    system_s: d(a.system, b.system),
                    softirq_s: d(a.softirq, b.softirq),
                    total_s: d(a.total, b.total),
                })
            })
            .collect()
    }
}

/// A control group's CPU quota and its throttling counters at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CgroupTicks {
    /// The group's path in its hierarchy.
    pub path: String,
    /// Its quota, in CPUs.
    pub quota_cpus: f64,
    /// Enforcement periods so far.
    pub periods: u64,
    /// Periods in which it ran out of its quota.
    pub throttled_periods: u64,
    /// Seconds its tasks were stopped by the quota so far.
    pub throttled_s: f64,
}

impl CgroupTicks {
    /// The counters' growth until `later` (None when the group or its quota changed between).
    fn until(&self, later: &CgroupTicks) -> Option<CgroupCpu> {
        (self.path == later.path && self.quota_cpus == later.quota_cpus).then(|| CgroupCpu {
            path: self.path.clone(),
            quota_cpus: self.quota_cpus,
            periods: later.periods.saturating_sub(self.periods),
            throttled_periods: later.throttled_periods.saturating_sub(self.throttled_periods),
            throttled_s: (later.throttled_s - self.throttled_s).max(0.0),
        })
    }
}

/// A quota file's text as CPUs: cgroup v2's `cpu.max` ("QUOTA PERIOD", "max PERIOD": none) or v1's
/// `cpu.cfs_quota_us` with its `cpu.cfs_period_us` (-1: none).
pub fn parse_quota(v2_max: Option<&str>, v1_quota_period: Option<(&str, &str)>) -> Option<f64> {
    let ratio = |q: &str, p: &str| {
        let (q, p) = (q.trim().parse::<f64>().ok()?, p.trim().parse::<f64>().ok()?);
        (q > 0.0 && p > 0.0).then_some(q / p)
    };
    match (v2_max, v1_quota_period) {
        (Some(m), _) => {
            let mut it = m.split_whitespace();
            ratio(it.next()?, it.next()?)
        }
        (None, Some((q, p))) => ratio(q, p),
        (None, None) => None,
    }
}

/// A `cpu.stat` file's throttling counters: periods, throttled periods and seconds throttled (v2's
/// `throttled_usec`, v1's `throttled_time` in ns).
pub fn parse_cgroup_stat(text: &str) -> (u64, u64, f64) {
    let get = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k)?.strip_prefix(' ')?.trim().parse::<u64>().ok())
    };
    let throttled_s = get("throttled_usec")
        .map(|u| u as f64 / 1e6)
        .or_else(|| get("throttled_time").map(|n| n as f64 / 1e9))
        .unwrap_or(0.0);
    (
        get("nr_periods").unwrap_or(0),
        get("nr_throttled").unwrap_or(0),
        throttled_s,
    )
}

/// Whether this CPU has the instructions AES-GCM needs to be fast (x86-64: AES-NI and PCLMULQDQ;
/// AArch64: AES and PMULL); None where landspeed cannot ask.
pub fn aes_instructions() -> Option<bool> {
    #[cfg(target_arch = "x86_64")]
    {
        Some(std::arch::is_x86_feature_detected!("aes") && std::arch::is_x86_feature_detected!("pclmulqdq"))
    }
    #[cfg(target_arch = "aarch64")]
    {
        Some(
            std::arch::is_aarch64_feature_detected!("aes")
                && std::arch::is_aarch64_feature_detected!("pmull"),
        )
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_busy_work() {
        let a = CpuSnapshot::take();
        let start = Instant::now();
        let mut x = 0u64;
        while start.elapsed().as_millis() < 100 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let t = a.until(&CpuSnapshot::take());
        assert!(t.wall_s >= 0.1);
        assert!(t.process_user_s + t.process_system_s > 0.05, "{t:?}");
        assert!(t.system_total_s > 0.0);
        assert!(t.cpus >= 1);
        assert!(!t.per_cpu.is_empty(), "{t:?}");
        assert!(t.per_cpu.iter().any(|c| c.busy_s > 0.0), "{t:?}");
    }

    #[test]
    fn a_thread_clock_counts_its_own_thread_only() {
        let busy = std::thread::spawn(|| {
            let clock = ThreadClock::start();
            let start = Instant::now();
            let mut x = 0u64;
            while start.elapsed().as_millis() < 150 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            std::hint::black_box(x);
            clock.stop(vec![3])
        });
        // The idle thread blocks on a message that never comes, for as long as the busy one spins.
        let (_keep, never) = std::sync::mpsc::channel::<()>();
        let idle = std::thread::spawn(move || {
            let clock = ThreadClock::start();
            let _ = never.recv_timeout(std::time::Duration::from_millis(150));
            clock.stop(vec![4])
        });
        let (busy, idle) = (busy.join().unwrap(), idle.join().unwrap());
        assert_eq!(busy.streams, [3]);
        // Spinning for 150 ms uses CPU time (at least a third of it, even on a crowded machine); blocking
        // uses almost none.
        assert!(busy.user_s + busy.system_s > 0.05, "{busy:?}");
        assert!(idle.user_s + idle.system_s < 0.05, "{idle:?}");
        assert!(busy.wall_s >= 0.15 && busy.last_cpu.is_some(), "{busy:?}");
    }
}
