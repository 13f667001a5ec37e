//! What seal writes for people: the one colour policy (anstream's, as clap's: NO_COLOR set and
//! non-empty turns colour off), writes to stdout and stderr that return errors instead of
//! panicking, and how wide a line on stderr may be.

use std::fmt::Display;
use std::io::{IsTerminal, Write};

/// `println!` that returns the write error instead of panicking: a closed pipe ends seal
/// quietly (see `usage::exit_code`).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout(), $($arg)*)
    }};
}

/// Whether to colour what goes to `stream`: a terminal that takes colour, and neither
/// `NO_COLOR` (set and non-empty) nor `CLICOLOR=0` says otherwise (`CLICOLOR_FORCE` forces it).
pub fn colour<S: anstream::stream::RawStream>(stream: &S) -> bool {
    anstream::AutoStream::choice(stream) != anstream::ColorChoice::Never
}

/// Whether to colour stdout.
pub fn colour_stdout() -> bool {
    colour(&std::io::stdout())
}

/// One diagnostic line on stderr, `seal: ` first. Best effort: when stderr is gone (closed,
/// full) there is no one left to tell, and seal must not panic over it.
pub fn note(line: impl Display) {
    let _ = writeln!(std::io::stderr().lock(), "seal: {line}");
}

/// `seal: warning: LINE` on stderr (best effort, see [`note`]).
pub fn warn(line: impl Display) {
    note(format_args!("warning: {line}"));
}

/// Columns a summary line on stderr may take: no limit when stderr is not a terminal (a log or
/// a pipe keeps the whole line); on a terminal, `COLUMNS` when it is a number, else the
/// terminal's width, else 80.
pub fn stderr_width() -> Option<usize> {
    let stderr = std::io::stderr();
    if !stderr.is_terminal() {
        return None;
    }
    Some(terminal_width(
        std::env::var("COLUMNS").ok().as_deref(),
        window_columns(libc::STDERR_FILENO),
    ))
}

/// The width of a terminal: `COLUMNS` when it is a positive number, else what the terminal
/// says, else 80.
pub fn terminal_width(columns: Option<&str>, window: Option<usize>) -> usize {
    columns
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c > 0)
        .or(window)
        .unwrap_or(80)
}

fn window_columns(fd: libc::c_int) -> Option<usize> {
    // SAFETY: TIOCGWINSZ fills a zeroed winsize for a descriptor we only query.
    unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        (libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) == 0 && ws.ws_col > 0)
            .then_some(ws.ws_col as usize)
    }
}

/// Whether an error is a write to a closed pipe (`seal … | head`).
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_wins_then_the_window_then_80() {
        assert_eq!(terminal_width(Some("132"), Some(100)), 132);
        assert_eq!(terminal_width(Some("wide"), Some(100)), 100);
        assert_eq!(terminal_width(Some("0"), None), 80);
        assert_eq!(terminal_width(None, None), 80);
    }

    #[test]
    fn an_empty_no_color_does_not_turn_colour_off() {
        // CLICOLOR_FORCE colours even a Vec; NO_COLOR (set and non-empty) still wins over it,
        // an empty NO_COLOR does not (no-color.org). The only test that touches these variables.
        std::env::set_var("CLICOLOR_FORCE", "1");
        std::env::set_var("NO_COLOR", "");
        let empty = colour(&Vec::<u8>::new());
        std::env::set_var("NO_COLOR", "1");
        let set = colour(&Vec::<u8>::new());
        std::env::remove_var("NO_COLOR");
        std::env::remove_var("CLICOLOR_FORCE");
        assert!(empty && !set);
        let f = tempfile::tempfile().unwrap();
        assert!(!colour(&f), "a file is not a terminal");
    }
}
