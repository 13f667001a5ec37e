//! What a Go executable's `partly sealed` line says of its runtime's random numbers, from what
//! the image's set-up did (the supervisor at its exec stop, libseal in a cgo program's
//! constructor: a `go-runtime-random` event in the process's census when more than `select`
//! order stays per thread, `seal_abi::supervised::go_rand::outcome`), and of its
//! `crypto/rand`'s cost, read from the file by the look-up the supervisor and libseal make
//! (`seal_abi::supervised::go_site`: the symbol table, else the `pclntab`).

use seal_abi::supervised::go_rand::outcome;
use seal_abi::supervised::pclntab;

/// What a Go binary whose functions cannot be found (neither table read) pays for
/// `crypto/rand`: its `GetRandom` is not found, so its reads stay system calls (said for a
/// static image and a cgo program alike).
const UNREAD_COST: &str = "; its crypto/rand reads are each a system call to the supervisor \
     (~40 µs a read, where other Go binaries' are served in the image: its function table \
     could not be read)";

/// Go 1.22 and later: `runtime.rand` is one sequence; only the scheduler's own generator
/// (`cheaprand`: `select` order, work stealing) is still drawn per thread. Go 1.19–1.21 whose
/// map code's inlined `fastrand` copies were found (`go_wyrand`): the same.
const SELECT_ONLY: &str = "select order (the scheduler's cheaprand: seeded by seal, but drawn \
     per thread), ";
/// Go 1.19–1.21 whose map code is not in a shape `go_wyrand` knows: `fastrand`'s out-of-line
/// bodies are one sequence (temp names, `math/rand`'s seed); the map code's inlined copies
/// are not.
const MAPS: &str = "map and select order (the runtime's fastrand inlined in its map code and \
     scheduler: seeded by seal, but drawn per thread as the scheduler runs goroutines), ";
/// Nothing redirected (why follows).
const ALL: &str = "map order, math/rand's global source, os.MkdirTemp names and select order \
     (the runtime's generators: seeded by seal, but drawn per thread as the scheduler runs \
     goroutines; ";

/// `(cost, real)`: the cost note (empty, or [`UNREAD_COST`]) of Go executable `program`, and
/// the "real:" part about the runtime's random numbers, from `random`: what its process's
/// census says stayed per thread (`go-runtime-random`; none: only `select` order).
pub fn notes(program: &str, random: Option<&str>) -> (&'static str, String) {
    let unread = !super::auxv::has_symtab(program)
        && std::fs::read(program)
            .is_ok_and(|f| pclntab::lookup(&f, [b"runtime.main"]).is_none_or(|r| r[0].0 == 0));
    let cost = if unread { UNREAD_COST } else { "" };
    (cost, real(random))
}

/// The "real:" part about a Go image's random numbers, from its `go-runtime-random` event.
pub fn real(random: Option<&str>) -> String {
    match random {
        None => SELECT_ONLY.to_string(),
        Some(d) if d.starts_with(outcome::MAPS) => MAPS.to_string(),
        Some(d) => {
            let why = d.split_once(outcome::BECAUSE).map_or(d, |(_, why)| why);
            format!("{ALL}not redirected: {why}), ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line follows what was done: nothing said is only `select` order; a failed or
    /// impossible redirect names what stays real and why.
    #[test]
    fn what_stays_real_follows_the_recorded_outcome() {
        assert_eq!(real(None), SELECT_ONLY);
        assert_eq!(real(Some(outcome::MAPS)), MAPS);
        let failed = format!("{}{}{}", outcome::NONE, outcome::BECAUSE, outcome::MMAP);
        let line = real(Some(&failed));
        assert!(
            line.starts_with("map order, math/rand's global source"),
            "{line}"
        );
        assert!(
            line.ends_with(&format!("not redirected: {}), ", outcome::MMAP)),
            "{line}"
        );
    }
}
