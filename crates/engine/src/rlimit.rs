//! Raises the open-file limit to its hard maximum. A 1024-stream test needs over a thousand descriptors
//! on each end, more than the usual soft limit of 1024; asking the kernel once at startup is cheaper than
//! a confusing "too many open files" halfway through connecting.

/// Raises RLIMIT_NOFILE's soft limit to the hard limit; returns the limit now in force.
pub fn raise_fd_limit() -> u64 {
    // SAFETY: getrlimit/setrlimit read and write the plain struct we pass.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 0;
        }
        if r.rlim_cur < r.rlim_max {
            let want = libc::rlimit {
                rlim_cur: r.rlim_max,
                rlim_max: r.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                return want.rlim_cur;
            }
        }
        r.rlim_cur
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn limit_is_positive() {
        assert!(super::raise_fd_limit() > 0);
    }
}
