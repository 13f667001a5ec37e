//! What a Go executable's `partly sealed` line says of its runtime's random numbers and of its
//! `crypto/rand`'s cost, read from the file by the same look-ups the supervisor and libseal
//! make (`seal_abi::supervised::go_site`: the symbol table, else the `pclntab`).

use seal_abi::supervised::{go_site, pclntab};

/// What a Go binary whose functions cannot be found (neither table read) pays for
/// `crypto/rand`: its `GetRandom` is not found, so its reads stay system calls (said for a
/// static image and a cgo program alike).
const UNREAD_COST: &str = "; its crypto/rand reads are each a system call to the supervisor \
     (~40 µs a read, where other Go binaries' are served in the image: its function table \
     could not be read)";

/// Go 1.22 and later: `runtime.rand` is one sequence, and so is `select` order where
/// `selectgo`'s inlined `cheaprand` is in a shape `go_select` knows (then nothing is said);
/// where it is not, `select` order is still drawn per thread. Go 1.19–1.21 whose map code's
/// inlined `fastrand` copies were found (`go_wyrand`): the same.
const SELECT_ONLY: &str = "select order (the scheduler's cheaprand: seeded by seal, but drawn \
     per thread), ";
/// Go 1.19–1.21 whose map code is not in a shape `go_wyrand` knows: `fastrand`'s out-of-line
/// bodies are one sequence (temp names, `math/rand`'s seed); the map code's inlined copies
/// are not.
const MAPS: &str = "map and select order (the runtime's fastrand inlined in its map code and \
     scheduler: seeded by seal, but drawn per thread as the scheduler runs goroutines), ";
/// Go 1.19–1.21 whose `selectgo` is redirected (`go_select`) but whose map code is not.
const MAPS_ONLY: &str = "map order (the runtime's fastrand inlined in its map code: seeded by \
     seal, but drawn per thread as the scheduler runs goroutines), ";
/// Nothing found to redirect.
const ALL: &str = "map order and the runtime's fastrand (os.MkdirTemp names; seeded by seal, \
     but drawn per thread as the scheduler runs goroutines), ";

/// `(cost, real)`: the cost note (empty, or [`UNREAD_COST`]) and the "real:" part about the
/// runtime's random numbers, of Go executable `program`.
pub fn notes(program: &str) -> (&'static str, &'static str) {
    let Ok(f) = std::fs::read(program) else {
        return ("", ALL);
    };
    let readable = super::auxv::has_symtab(program)
        || pclntab::lookup(&f, [b"runtime.main"]).is_some_and(|r| r[0].0 != 0);
    let cost = if readable { "" } else { UNREAD_COST };
    // Map order and select order each one sequence, or not (`go_wyrand`, `go_select`).
    let real = match go_site::find_all(&f).rand {
        Some(s) => match (s.maps || s.inlined[0].0 != 0, s.select[0].0 != 0) {
            (true, true) => "",
            (true, false) => SELECT_ONLY,
            (false, true) => MAPS_ONLY,
            (false, false) => MAPS,
        },
        None => ALL,
    };
    (cost, real)
}
