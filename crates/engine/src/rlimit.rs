//! Raises the open-file limit to its hard maximum. A 1024-stream test needs over a thousand descriptors
//! on each end, more than the usual soft limit of 1024; asking the kernel once at startup is cheaper than
//! a confusing "too many open files" halfway through connecting.

/// Raises RLIMIT_NOFILE's soft limit to the hard limit and returns the limit now in force
/// ([`fd_limit`]: the soft limit, or 0 if it cannot be read). Windows has no such limit on sockets.
pub use crate::os::{fd_limit, raise_fd_limit};

/// Descriptors one end needs for `streams` data streams: one socket each, and a margin for the
/// control connection, epoll or io_uring instances, pipes, the archive and the standard streams.
pub fn descriptors_for(streams: u32) -> u64 {
    u64::from(streams) + MARGIN
}

/// Descriptors kept for everything but the data streams.
const MARGIN: u64 = 64;

/// Data streams an open-file limit of `limit` leaves room for (at least 1).
pub fn streams_room(limit: u64) -> u64 {
    limit.saturating_sub(MARGIN).max(1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn limit_is_positive() {
        assert!(super::raise_fd_limit() > 0);
        assert!(super::fd_limit() > 0);
    }

    #[test]
    fn streams_need_a_descriptor_each_and_a_margin() {
        assert_eq!(super::descriptors_for(1024), 1088);
        assert!(super::descriptors_for(1) > 1);
        assert_eq!(super::streams_room(1088), 1024);
        assert_eq!(super::streams_room(40), 1);
    }
}
