//! Measures the payload generator and verifier alone (GB/s per core), to choose their design:
//! `cargo run --release -p landspeed-core --example payload_speed [LEN]`.

use landspeed_core::payload::{Generator, Pattern, Verifier};
use std::time::Instant;

fn main() {
    let len: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(256 * 1024);
    let p = Pattern::new(42);
    let mut g = Generator::new(&p, len);
    let total: u64 = 8 << 30;
    let t = Instant::now();
    let mut off = 0u64;
    let mut sink = 0u8;
    while off < total {
        sink ^= g.fill(1, off, len)[7];
        off += len as u64;
    }
    let gen_s = t.elapsed().as_secs_f64();
    let mut v = Verifier::new(&p, len);
    let mut g2 = Generator::new(&p, len);
    let mut buf = vec![0u8; len];
    let t = Instant::now();
    let mut off = 0u64;
    let mut bad = 0;
    let mut copy_s = 0.0;
    while off < total {
        let c = Instant::now();
        buf.copy_from_slice(g2.fill(1, off, len));
        copy_s += c.elapsed().as_secs_f64();
        bad += v.check(1, off, &buf).is_some() as u32;
        off += len as u64;
    }
    let ver_s = t.elapsed().as_secs_f64() - copy_s;
    println!(
        "len {len}: generate {:.1} GB/s, verify {:.1} GB/s (bad {bad}, sink {sink})",
        total as f64 / gen_s / 1e9,
        total as f64 / ver_s / 1e9
    );
}
