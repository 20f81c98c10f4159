//! What a failing test said, where CI's log keeps it. libtest prints each failure's message only at
//! the end of the suite, after half an hour of other output, and CI keeps the head and the tail of a
//! long log: a failure in the middle lost its words (stop 84: three failures, no message). A panic in
//! a test is written at once, in one line, straight to the process's stderr (past libtest's
//! capture), and appended to [`FILE`] (under the build's own scratch directory, emptied when the
//! suite starts), which .ci/run prints as the last lines of a failed run.
use std::io::Write;
use std::sync::Once;

/// How much of a message is kept: its start says what failed.
const KEPT_CHARS: usize = 600;

/// Where the suite's panics go, one line each (.ci/run reads it).
pub const FILE: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/it-failures.txt");

/// Records every later panic (once per process, [`FILE`] emptied first; the default report still
/// follows).
pub fn record_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let _ = std::fs::create_dir_all(env!("CARGO_TARGET_TMPDIR"));
        let _ = std::fs::write(FILE, "");
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            note(info);
            default(info);
        }));
    });
}

fn note(info: &std::panic::PanicHookInfo) {
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("a test's helper thread");
    let what = info
        .payload()
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| info.payload().downcast_ref::<&str>().copied())
        .unwrap_or("(no message)");
    let at = info
        .location()
        .map(|l| format!("{}:{}", l.file(), l.line()))
        .unwrap_or_default();
    let line = format!("{name} panicked at {at}: {}\n", one_line(what));
    let _ = std::io::stderr().write_all(format!("test failure: {line}").as_bytes());
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(FILE) {
        let _ = f.write_all(line.as_bytes());
    }
}

/// The message on one line, cut at [`KEPT_CHARS`].
fn one_line(what: &str) -> String {
    let flat: String = what.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(KEPT_CHARS) {
        Some((i, _)) => format!("{}...", &flat[..i]),
        None => flat,
    }
}

#[test]
fn a_message_is_kept_on_one_line_and_cut() {
    assert_eq!(one_line("not right:\n  a\n\tb"), "not right: a b");
    let long = "é".repeat(KEPT_CHARS + 5);
    assert_eq!(one_line(&long).chars().count(), KEPT_CHARS + 3);
}
