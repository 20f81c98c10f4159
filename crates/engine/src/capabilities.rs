//! Which of landspeed's data paths this kernel offers, found by trying each on a throwaway socket:
//! io_uring, MSG_ZEROCOPY, UDP segmentation and receive offload, MPTCP, kernel TLS. `landspeed --version` names
//! them, so a bug report carries the facts that decide which path a test took.

/// One data path and whether this kernel has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capability {
    /// Its name as the version line shows it.
    pub name: &'static str,
    /// The kernel accepted it.
    pub available: bool,
}

/// Tries every data path now (none on Windows, where none of them exists).
pub fn probe() -> Vec<Capability> {
    crate::os::capabilities()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_is_probed_once_by_name() {
        let c = probe();
        let names: Vec<&str> = c.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            ["io_uring", "MSG_ZEROCOPY", "UDP GSO", "UDP GRO", "MPTCP", "kTLS"]
        );
        // Linux has had UDP GRO since 5.0 and SO_ZEROCOPY since 4.14: the machines landspeed runs on.
        assert!(c[1].available && c[3].available, "{c:?}");
    }
}
