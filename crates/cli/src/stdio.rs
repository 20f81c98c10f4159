//! Writing to the terminal without dying of it. `println!` panics when its stream is gone (`landspeed
//! run ... | head -1` closes stdout after one line), and a panic there would cost the run: its
//! warnings, its archive entry and its exit status. Everything the binary prints goes through these
//! macros instead: a stream that fails stops taking output, silently, and the command goes on to its
//! end (the archive still gets the run; the exit status is the command's own).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static STDOUT_GONE: AtomicBool = AtomicBool::new(false);
static STDERR_GONE: AtomicBool = AtomicBool::new(false);

/// Write to stdout; after the first failure, nothing more is tried.
pub fn to_stdout(args: std::fmt::Arguments<'_>) {
    write_to(&mut std::io::stdout().lock(), &STDOUT_GONE, args);
}

/// Write to stderr; after the first failure, nothing more is tried.
pub fn to_stderr(args: std::fmt::Arguments<'_>) {
    write_to(&mut std::io::stderr().lock(), &STDERR_GONE, args);
}

fn write_to(w: &mut dyn Write, gone: &AtomicBool, args: std::fmt::Arguments<'_>) {
    if gone.load(Ordering::Relaxed) {
        return;
    }
    if w.write_fmt(args).and_then(|()| w.flush()).is_err() {
        gone.store(true, Ordering::Relaxed);
    }
}

/// `print!` that survives a closed stdout.
macro_rules! out {
    ($($arg:tt)*) => { $crate::stdio::to_stdout(format_args!($($arg)*)) };
}

/// `println!` that survives a closed stdout.
macro_rules! outln {
    () => { $crate::stdio::to_stdout(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::stdio::to_stdout(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprintln!` that survives a closed stderr.
macro_rules! errln {
    () => { $crate::stdio::to_stderr(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::stdio::to_stderr(format_args!("{}\n", format_args!($($arg)*))) };
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Closed(usize);
    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            self.0 += 1;
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_stream_is_tried_once_and_never_panics() {
        let gone = AtomicBool::new(false);
        let mut w = Closed(0);
        write_to(&mut w, &gone, format_args!("a line\n"));
        write_to(&mut w, &gone, format_args!("another\n"));
        assert!(gone.load(Ordering::Relaxed));
        assert_eq!(w.0, 1);
    }

    #[test]
    fn an_open_stream_gets_every_line() {
        let gone = AtomicBool::new(false);
        let mut w: Vec<u8> = Vec::new();
        write_to(&mut w, &gone, format_args!("{}\n", 1));
        write_to(&mut w, &gone, format_args!("{}\n", 2));
        assert_eq!(w, b"1\n2\n");
        assert!(!gone.load(Ordering::Relaxed));
    }
}
