//! What a Go executable's `partly sealed` line says of its runtime's random numbers, from what
//! the image's set-up did (the supervisor at its exec stop, libseal in a cgo program's
//! constructor: a `go-runtime-random` event in the process's census when more than `select`
//! order stays per thread, `seal_abi::supervised::go_rand::outcome`), and of its
//! `crypto/rand`'s cost, read from the file by the look-up the supervisor and libseal make
//! (`seal_abi::supervised::go_site`: the symbol table, else the `pclntab`).

use seal_abi::supervised::go_rand::outcome;
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
/// Nothing redirected (why follows).
const ALL: &str = "map order, math/rand's global source, os.MkdirTemp names and select order \
     (the runtime's generators: seeded by seal, but drawn per thread as the scheduler runs \
     goroutines; ";

/// `(cost, real)`: the cost note (empty, or [`UNREAD_COST`]) of Go executable `program`, and
/// the "real:" part about the runtime's random numbers, from `random`: what its process's
/// census says stayed per thread (`go-runtime-random`; none: only `select` order, and not
/// that where the file's `selectgo` copy is one `go_select` redirects, which the set-up does
/// with the rest or not at all).
pub fn notes(program: &str, random: Option<&str>) -> (&'static str, String) {
    let file = std::fs::read(program).ok();
    let unread = !super::auxv::has_symtab(program)
        && file
            .as_ref()
            .is_some_and(|f| pclntab::lookup(f, [b"runtime.main"]).is_none_or(|r| r[0].0 == 0));
    let cost = if unread { UNREAD_COST } else { "" };
    let select = file
        .as_ref()
        .and_then(|f| go_site::find_all(f).rand)
        .is_some_and(|s| s.select[0].0 != 0);
    (cost, real(random, select))
}

/// The "real:" part about a Go image's random numbers, from its `go-runtime-random` event and
/// whether its `select` order is redirected.
pub fn real(random: Option<&str>, select: bool) -> String {
    match (random, select) {
        (None, true) => String::new(),
        (None, false) => SELECT_ONLY.to_string(),
        (Some(d), true) if d.starts_with(outcome::MAPS) => MAPS_ONLY.to_string(),
        (Some(d), false) if d.starts_with(outcome::MAPS) => MAPS.to_string(),
        (Some(d), _) => {
            let why = d.split_once(outcome::BECAUSE).map_or(d, |(_, why)| why);
            format!("{ALL}not redirected: {why}), ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line follows what was done: nothing said is only `select` order, or nothing where
    /// `select` is redirected too; a failed or impossible redirect names what stays real and
    /// why.
    #[test]
    fn what_stays_real_follows_the_recorded_outcome() {
        assert_eq!(real(None, false), SELECT_ONLY);
        assert_eq!(real(None, true), "");
        assert_eq!(real(Some(outcome::MAPS), false), MAPS);
        assert_eq!(real(Some(outcome::MAPS), true), MAPS_ONLY);
        let failed = format!("{}{}{}", outcome::NONE, outcome::BECAUSE, outcome::MMAP);
        let line = real(Some(&failed), true);
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
