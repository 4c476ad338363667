// SPDX-License-Identifier: GPL-2.0-only
//! Standard output that its reader may close under us
//! (`scx_esn --stats 1 | head -3`, `scx_esn observe --json | head -1`).
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe fails with EPIPE, and
//! `print!` panics on that. Every report goes through [`write`] instead: a
//! closed stdout comes back as the [`Closed`] error, which the callers treat
//! as "nobody is listening any more": the scheduler stops as on SIGINT
//! (unloads, saves what it learned, exits 0), the other commands end
//! quietly with 0, as `head`'s other writers do.

use std::io::{self, Write};

/// Standard output was closed by its reader.
#[derive(Debug)]
pub struct Closed;

impl std::fmt::Display for Closed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("standard output was closed by its reader")
    }
}

impl std::error::Error for Closed {}

/// Writes `text` to standard output at once (flushed: a reader of a pipe
/// sees each interval when it is taken, not when a buffer fills).
pub fn write(text: &str) -> anyhow::Result<()> {
    write_to(&mut io::stdout().lock(), text)
}

fn write_to(out: &mut impl Write, text: &str) -> anyhow::Result<()> {
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Err(Closed.into()),
        Err(err) => Err(anyhow::Error::new(err).context("writing to standard output")),
    }
}

/// Is `err` (anywhere in its chain) a closed standard output?
pub fn is_closed(err: &anyhow::Error) -> bool {
    err.chain().any(|e| e.is::<Closed>())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer whose reader went away, or that fails some other way.
    struct Failing(io::ErrorKind);

    impl Write for Failing {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(self.0.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_pipe_is_told_apart_from_other_errors() {
        let closed = write_to(&mut Failing(io::ErrorKind::BrokenPipe), "x").unwrap_err();
        assert!(is_closed(&closed));
        assert!(is_closed(&closed.context("printing an interval")));
        let full = write_to(&mut Failing(io::ErrorKind::StorageFull), "x").unwrap_err();
        assert!(!is_closed(&full));
        assert!(format!("{full:#}").starts_with("writing to standard output"));
    }

    #[test]
    fn text_reaches_the_writer_whole() {
        let mut buf = Vec::new();
        write_to(&mut buf, "one\ntwo\n").unwrap();
        assert_eq!(buf, b"one\ntwo\n");
    }
}
