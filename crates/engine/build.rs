//! Records the target triple this crate is compiled for (`platform::TARGET`, in `--version`).

fn main() {
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".to_string());
    println!("cargo:rustc-env=LANDSPEED_TARGET={target}");
    println!("cargo:rerun-if-env-changed=TARGET");
}
