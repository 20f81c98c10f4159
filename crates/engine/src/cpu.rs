//! CPU accounting for a test: this process's user and system time (getrusage) and the whole machine's
//! busy and softirq time (/proc/stat), snapshotted before and after, plus the clock rate used to turn
//! CPU-seconds into cycles per byte. docs/metrics.md says how each figure is derived.

use landspeed_core::endpoint::CpuTimes;
use std::time::Instant;

#[derive(Debug, Clone, Copy, Default)]
struct SystemTicks {
    busy: u64,
    softirq: u64,
    total: u64,
}

fn system_ticks() -> SystemTicks {
    let Ok(text) = std::fs::read_to_string("/proc/stat") else {
        return SystemTicks::default();
    };
    let Some(line) = text.lines().find(|l| l.starts_with("cpu ")) else {
        return SystemTicks::default();
    };
    // user nice system idle iowait irq softirq steal guest guest_nice
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let get = |i: usize| v.get(i).copied().unwrap_or(0);
    // guest time is already counted in user; leave it out of the total.
    let total: u64 = (0..8).map(get).sum();
    let idle = get(3) + get(4);
    SystemTicks {
        busy: total.saturating_sub(idle),
        softirq: get(6),
        total,
    }
}

fn process_times() -> (f64, f64) {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Online CPUs.
pub fn cpu_count() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
}

/// The nominal clock rate: cpufreq's maximum if the kernel exposes it, else /proc/cpuinfo's "cpu MHz".
pub fn clock_rate() -> Option<(f64, String)> {
    if let Ok(s) = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq") {
        if let Ok(khz) = s.trim().parse::<f64>() {
            return Some((khz * 1e3, "cpufreq cpuinfo_max_freq".into()));
        }
    }
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("cpu MHz"))?;
    let mhz: f64 = line.split(':').nth(1)?.trim().parse().ok()?;
    Some((mhz * 1e6, "/proc/cpuinfo cpu MHz".into()))
}

/// A point-in-time reading of the counters.
#[derive(Debug, Clone, Copy)]
pub struct CpuSnapshot {
    at: Instant,
    user: f64,
    system: f64,
    ticks: SystemTicks,
}

impl CpuSnapshot {
    /// This process's CPU times and the host's CPU ticks now.
    pub fn take() -> Self {
        let (user, system) = process_times();
        CpuSnapshot {
            at: Instant::now(),
            user,
            system,
            ticks: system_ticks(),
        }
    }

    /// CPU time used between `self` and a later snapshot.
    pub fn until(&self, later: &CpuSnapshot) -> CpuTimes {
        let hz = ticks_per_second();
        let d = |a: u64, b: u64| b.saturating_sub(a) as f64 / hz;
        let clock = clock_rate();
        CpuTimes {
            wall_s: later.at.duration_since(self.at).as_secs_f64(),
            process_user_s: (later.user - self.user).max(0.0),
            process_system_s: (later.system - self.system).max(0.0),
            system_busy_s: d(self.ticks.busy, later.ticks.busy),
            system_softirq_s: d(self.ticks.softirq, later.ticks.softirq),
            system_total_s: d(self.ticks.total, later.ticks.total),
            cpus: cpu_count(),
            clock_hz: clock.as_ref().map(|c| c.0),
            clock_source: clock.map(|c| c.1),
        }
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
    }
}
