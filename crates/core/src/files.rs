//! Disk-to-disk transfers (`run --send-file` / `--recv-file`): the file a test moves instead of the
//! generated payload, what each end measured about its disk, and the verdict. The sender reads and hashes
//! the file before the transfer (its disk's read rate), then the data goes straight from the file to the
//! socket; the receiver writes it straight into its file, flushes it to disk, and reads it back to hash
//! what actually landed (its disk's write and read rates). The file is intact when both SHA-256 digests
//! agree. Network, sender-disk and receiver-disk rates are reported apart so the slowest one shows.

use serde::{Deserialize, Serialize};

/// The file of a test, as both ends agree on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSpec {
    /// The file's name on the server (in its `--files` directory): a plain name, no path.
    pub name: String,
    /// Upload: its size, from the client's read. Download: None until the server has opened it.
    #[serde(default)]
    pub size_bytes: Option<u64>,
}

/// Why a file name cannot be used on a server.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 255
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '\0']);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "file name {name:?} is not a plain file name (no '/', not '.' or '..', at most 255 bytes)"
        ))
    }
}

/// What one end measured about its file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileReport {
    /// The file at this end.
    pub path: String,
    /// Its size, bytes.
    pub size_bytes: u64,
    /// SHA-256 of the file as this end read it (sender: before sending; receiver: read back from disk
    /// after the transfer and fsync).
    pub sha256_hex: String,
    /// Sender: reading and hashing the whole file before the transfer.
    pub read_s: f64,
    /// Receiver: fsync after the last byte.
    #[serde(default)]
    pub fsync_s: Option<f64>,
    /// Receiver: reading the written file back to hash it.
    #[serde(default)]
    pub verify_read_s: Option<f64>,
    /// The reads bypassed the page cache (O_DIRECT), so they measured the disk.
    pub direct_io: bool,
}

/// The transfer's verdict and its rates, in the result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileTransferResult {
    /// The file's name on the server.
    pub name: String,
    /// The file at the sending end.
    pub sender_path: String,
    /// The file at the receiving end.
    pub receiver_path: String,
    /// Its size, bytes.
    pub size_bytes: u64,
    /// SHA-256 of the file as the sender read it before the transfer, hex.
    pub sha256_sender_hex: String,
    /// SHA-256 of the file as the receiver read it back after fsync, hex.
    pub sha256_receiver_hex: String,
    /// Both digests agree and every byte arrived.
    pub verified: bool,
    /// Sender's disk: size over the read-and-hash pass.
    pub sender_read_bps: f64,
    /// The network transfer (the run's throughput, first to last byte at the receiver).
    pub network_bps: f64,
    /// Receiver's disk: size over the transfer plus the final fsync (when the data was durable).
    pub receiver_write_bps: f64,
    /// Receiver's disk: size over the verification read.
    pub receiver_read_bps: f64,
    /// The slowest of sender disk, network and receiver disk (write).
    pub limited_by: String,
}

fn bps(bytes: u64, s: f64) -> f64 {
    if s > 0.0 {
        bytes as f64 * 8.0 / s
    } else {
        0.0
    }
}

/// The result's file section from the sender's and the receiver's reports.
pub fn combine(
    sender: &FileReport,
    receiver: &FileReport,
    name: &str,
    network_bps: f64,
    transfer_s: f64,
    bytes_received: u64,
) -> FileTransferResult {
    let size = sender.size_bytes;
    let sender_read_bps = bps(size, sender.read_s);
    let receiver_write_bps = bps(size, transfer_s + receiver.fsync_s.unwrap_or(0.0));
    let limited_by = [
        ("sender disk", sender_read_bps),
        ("network", network_bps),
        ("receiver disk", receiver_write_bps),
    ]
    .into_iter()
    .filter(|(_, r)| *r > 0.0)
    .min_by(|a, b| a.1.total_cmp(&b.1))
    .map_or("unknown", |(n, _)| n)
    .to_string();
    FileTransferResult {
        name: name.to_string(),
        sender_path: sender.path.clone(),
        receiver_path: receiver.path.clone(),
        size_bytes: size,
        sha256_sender_hex: sender.sha256_hex.clone(),
        sha256_receiver_hex: receiver.sha256_hex.clone(),
        verified: sender.sha256_hex == receiver.sha256_hex
            && receiver.size_bytes == size
            && bytes_received == size,
        sender_read_bps,
        network_bps,
        receiver_write_bps,
        receiver_read_bps: bps(receiver.size_bytes, receiver.verify_read_s.unwrap_or(0.0)),
        limited_by,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rep(sha: &str, size: u64) -> FileReport {
        FileReport {
            path: "/x".into(),
            size_bytes: size,
            sha256_hex: sha.into(),
            read_s: 1.0,
            fsync_s: Some(1.0),
            verify_read_s: Some(0.5),
            direct_io: true,
        }
    }

    #[test]
    fn names_are_plain() {
        assert!(check_name("data.bin").is_ok());
        for bad in ["", ".", "..", "a/b", "../etc/passwd", "a\0b", &"x".repeat(256)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_verdict_needs_equal_digests_and_every_byte() {
        let ok = combine(&rep("aa", 1000), &rep("aa", 1000), "f", 4000.0, 1.0, 1000);
        assert!(ok.verified);
        // 1000 B: sender read 8000 bit/s, network 4000, receiver 8000 / 2 s = 4000 (ties: first).
        assert_eq!(ok.sender_read_bps, 8000.0);
        assert_eq!(ok.receiver_write_bps, 4000.0);
        assert_eq!(ok.receiver_read_bps, 16000.0);
        assert_eq!(ok.limited_by, "network");
        assert!(!combine(&rep("aa", 1000), &rep("ab", 1000), "f", 1.0, 1.0, 1000).verified);
        assert!(!combine(&rep("aa", 1000), &rep("aa", 999), "f", 1.0, 1.0, 999).verified);
        // A sender whose read took 4 s (2000 bit/s) is the slowest of the three.
        let mut slow = rep("aa", 1000);
        slow.read_s = 4.0;
        let slow_disk = combine(&slow, &rep("aa", 1000), "f", 1e9, 1.0, 1000);
        assert_eq!(slow_disk.limited_by, "sender disk");
        // With the network slowest, it is named.
        assert_eq!(
            combine(&slow, &rep("aa", 1000), "f", 100.0, 1.0, 1000).limited_by,
            "network"
        );
    }
}
