//! What an iperf3 document says about the program and the host (version, `uname`, the cookie), for
//! the drop-in's client (`landspeed iperf3 -c -J`) and its server (`serve --iperf3-json`).

use landspeed_report::iperf3_json::Iperf3Meta;

/// iperf3's document for a test that failed (client and server alike): no connection, no interval,
/// an empty `end`, and the error as iperf3 words it.
pub fn error_document(meta: &Iperf3Meta, error: &str) -> serde_json::Value {
    serde_json::json!({"start": {"connected": [], "version": meta.version,
        "system_info": meta.system_info}, "intervals": [], "end": {}, "error": error})
}

/// The document's facts for the client's end or the server's.
pub fn meta(server: bool) -> Iperf3Meta {
    Iperf3Meta {
        version: format!(
            "landspeed {} (iperf3 3.21 drop-in)",
            landspeed_core::SOFTWARE_VERSION
        ),
        system_info: system_info(),
        cookie: cookie(),
        server,
        title: None,
        extra_data: None,
    }
}

/// iperf3's `system_info`: uname's system, node, release, version and machine (from /proc).
fn system_info() -> String {
    let read = |k: &str| {
        landspeed_engine::os::kernel_file(format!("/proc/sys/kernel/{k}"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    format!(
        "{} {} {} {} {}",
        read("ostype"),
        read("hostname"),
        read("osrelease"),
        read("version"),
        std::env::consts::ARCH
    )
}

/// A 36-character cookie of iperf3's alphabet (a-z, 2-7), as iperf3 makes one per test.
fn cookie() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut seed = [0u8; 36];
    let _ = getrandom::fill(&mut seed);
    seed.iter()
        .map(|b| ALPHABET[usize::from(*b) % 32] as char)
        .collect()
}
