//! Records the git commit the binary is built from (`landspeed --version`), when the source is a git
//! checkout; a build from a source package says "commit unknown".

fn main() {
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|c| !c.is_empty());
    let dirty = std::process::Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .is_some_and(|o| o.status.success() && !o.stdout.is_empty());
    let text = match commit {
        Some(c) if dirty => format!("commit {c}, modified"),
        Some(c) => format!("commit {c}"),
        None => "commit unknown".to_string(),
    };
    println!("cargo:rustc-env=LANDSPEED_COMMIT={text}");
    for p in ["../../.git/HEAD", "../../.git/index"] {
        if std::path::Path::new(p).exists() {
            println!("cargo:rerun-if-changed={p}");
        }
    }
}
