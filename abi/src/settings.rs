//! The run's settings as they travel from the launcher to every sealed process: one type, one
//! encoding into environment variables, one decoding, and one table of families (the name a
//! user types after `--unseal`, the shim's flag bits, the census family).
//!
//! The variables live in their own namespace ([`PREFIX`], `LIBSEAL_*`), apart from the
//! user-facing `SEAL_*` configuration: a `seal` started inside a sealed run reads only its own
//! flags, environment and seal.toml, never the outer run's contract.

use crate::{flags, Family};

/// Every contract variable starts with this.
pub const PREFIX: &str = "LIBSEAL_";

/// Builds the contract from the rows of [`crate::setting_rows`]: the constants, [`VARS`] (in
/// the rows' `[N]` order), [`Settings`], [`Run`] (the fields the launcher finds per run), the
/// encoding ([`Settings::value`]) and the decoding ([`Settings::decode`]). The user's side of
/// each row (flag, `SEAL_*` variable, file key) is the launcher's.
macro_rules! contract {
    (
        run_fields $run_fields:tt
        shim_fields $shim_fields:tt
        run { $( { $(#[doc = $rdoc:literal])* } $rpos:literal $rkonst:ident $rvar:literal
            $rfield:ident $rty:ty, $rdefault:expr, { $($rfix:expr)? } )* }
        shim { $( { $(#[doc = $doc:literal])* } $pos:literal $konst:ident $var:literal
            $field:ident $ty:ty, $default:expr, { $($fix:expr)? } )* }
        user $user:tt
    ) => {
        $( $(#[doc = $rdoc])* pub const $rkonst: &str = $rvar; )*
        $( $(#[doc = $doc])* pub const $konst: &str = $var; )*

        /// The run-wide variables, in the order they are written.
        pub const VARS: [&str; [$($rkonst,)* $($konst,)*].len()] = {
            let mut vars = [""; [$($rkonst,)* $($konst,)*].len()];
            $( vars[$rpos] = $rkonst; )*
            $( vars[$pos] = $konst; )*
            vars
        };

        /// The run's settings. Byte strings, so the shim can decode them from `environ` in
        /// place. Each field's variable and meaning: the constants above.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct Settings<'a> {
            $( $(#[doc = $rdoc])* pub $rfield: $rty, )*
            $( $(#[doc = $doc])* pub $field: $ty, )*
        }

        /// The contract's fields that are no user setting: the launcher finds them per run.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct Run<'a> {
            $( $(#[doc = $rdoc])* pub $rfield: $rty, )*
        }

        impl<'a> Settings<'a> {
            /// Hands each variable of [`VARS`] to `put` as `(name, value)`, numbers in decimal.
            pub fn encode(&self, mut put: impl FnMut(&'static str, &[u8])) {
                let mut buf: NumBuf = [0; 24];
                for name in VARS {
                    put(name, self.value(name, &mut buf));
                }
            }

            /// The encoded value of variable `name` (one of [`VARS`]; empty for any other).
            pub fn value<'b>(&'b self, name: &str, buf: &'b mut NumBuf) -> &'b [u8] {
                $( if name == $rkonst { return SettingValue::encoded(&self.$rfield, buf); } )*
                $( if name == $konst { return SettingValue::encoded(&self.$field, buf); } )*
                &[]
            }

            /// Reads the settings through `get`; `None` when there is no run directory (not
            /// sealed). A missing or malformed value keeps its default (the launcher always
            /// writes them all).
            pub fn decode(get: impl Fn(&'static str) -> Option<&'a [u8]>) -> Option<Settings<'a>> {
                let s = Settings {
                    $( $rfield: get($rkonst)
                        .and_then(<$rty as SettingValue<'a>>::parse)
                        $( .and_then($rfix) )?
                        .unwrap_or($rdefault), )*
                    $( $field: get($konst)
                        .and_then(<$ty as SettingValue<'a>>::parse)
                        $( .and_then($fix) )?
                        .unwrap_or($default), )*
                };
                (!s.run_dir.is_empty()).then_some(s)
            }
        }
    };
}

/// A type a setting can have: how it is written into a variable and read back.
trait SettingValue<'a>: Sized {
    fn encoded<'b>(&'b self, buf: &'b mut NumBuf) -> &'b [u8];
    fn parse(raw: &'a [u8]) -> Option<Self>;
}

impl<'a> SettingValue<'a> for &'a [u8] {
    fn encoded<'b>(&'b self, _: &'b mut NumBuf) -> &'b [u8] {
        self
    }
    fn parse(raw: &'a [u8]) -> Option<Self> {
        Some(raw)
    }
}

impl SettingValue<'_> for i64 {
    fn encoded<'b>(&'b self, buf: &'b mut NumBuf) -> &'b [u8] {
        let n = write_i64(*self, buf);
        &buf[..n]
    }
    fn parse(raw: &[u8]) -> Option<Self> {
        parse_i64(raw)
    }
}

impl SettingValue<'_> for u64 {
    fn encoded<'b>(&'b self, buf: &'b mut NumBuf) -> &'b [u8] {
        let n = crate::write_u64(*self, buf);
        &buf[..n]
    }
    fn parse(raw: &[u8]) -> Option<Self> {
        parse_u64(raw)
    }
}

impl SettingValue<'_> for u32 {
    fn encoded<'b>(&'b self, buf: &'b mut NumBuf) -> &'b [u8] {
        let n = crate::write_u64(*self as u64, buf);
        &buf[..n]
    }
    fn parse(raw: &[u8]) -> Option<Self> {
        parse_u64(raw).and_then(|v| u32::try_from(v).ok())
    }
}

crate::setting_rows!(contract);

/// The launcher's real pid (ten digits) when it left the root command's guard to libseal, else
/// zeros: the root (virtual pid 1000) then asks the kernel to kill it when the launcher dies
/// (`PR_SET_PDEATHSIG`), exits at once if the launcher is already gone, and empties the signal
/// mask it was started with. The launcher then starts the command with `posix_spawn` (no copy
/// of its own address space); with zeros it does the same in the forked child before exec, as
/// for a root that never loads libseal.
pub const GUARD: &str = "LIBSEAL_GUARD";

/// Padding (`LIBSEAL_PAD=xxx…`) that makes the strings and pointers the kernel copies onto a
/// new image's stack one fixed size; see [`pad_entry_len`]. Rewritten on every exec.
pub const PAD: &str = "LIBSEAL_PAD";

/// The initial stack's strings and pointers are padded up to a multiple of this many bytes.
/// Differences in environment size, arguments and program path smaller than the block vanish;
/// a larger real size lands on the next multiple (then stack addresses move by whole blocks).
/// Every byte of the block is copied by the kernel at every exec (about 1.8 µs per KiB on the
/// AMD guests measured, 0.5 µs on Intel ones): 32 KiB holds a desktop shell's or a CI runner's
/// environment (3–15 KiB) with room to spare, at half the cost of 64 KiB.
pub const LAYOUT_BLOCK: usize = 32 << 10;

/// Bytes (with its NUL) of the `LIBSEAL_PAD=xxx…` entry to add to an environment so that what
/// the kernel puts on a new stack has one fixed size.
///
/// `strings` is every byte the kernel copies as strings without the pad: the file name given
/// to exec (it is also the `AT_EXECFN` string), the arguments and the environment entries,
/// each with its NUL. `pointers` is argc + envc without the pad. The kernel (fs/exec.c,
/// create_elf_tables) copies the strings below the stack top, aligns down to 16, adds the
/// platform string and the 16 `AT_RANDOM` bytes (fixed sizes), the auxiliary vector (fixed
/// for one machine and program), then argc and the argv/envp pointer arrays, and aligns down
/// to 16 again. With the pad, strings + 16·⌈pointers/2⌉ is a constant ≡ 8 (mod 16), which
/// makes the final stack pointer the same whatever the mix of strings and pointers.
pub fn pad_entry_len(strings: usize, pointers: usize) -> usize {
    let n = pointers + 1;
    let ptr_room = 8 * (n + n % 2);
    let min_entry = PAD.len() + 2; // "LIBSEAL_PAD=" and the NUL
    let base = strings + ptr_room + min_entry;
    let total = (base.saturating_sub(8)).div_ceil(LAYOUT_BLOCK) * LAYOUT_BLOCK + 8;
    total - ptr_room - strings
}

/// Logical clock (ns) of the thread that called exec; the new image starts from it.
pub const CLOCK: &str = "LIBSEAL_CLOCK";
/// Virtual pid of this process (set by the parent before spawn/exec).
pub const VPID: &str = "LIBSEAL_VPID";
/// Virtual pid of the parent process.
pub const PPID: &str = "LIBSEAL_PPID";
/// 64-bit key of this process's place in the process creation tree (hex).
pub const LINEAGE: &str = "LIBSEAL_LINEAGE";
/// How many children this process (across its exec'd images) has already created.
pub const CHILDREN: &str = "LIBSEAL_CHILDREN";
/// Exec generation of this process image (0 for the first image of a process).
pub const GEN: &str = "LIBSEAL_GEN";
/// The program the new image runs, as its parent's exec hook found it: `<key>.<name>` in hex,
/// the [`crate::exe_key`] of its run-wide name and the [`crate::name_hash`] of the file name
/// the kernel was given (the image checks it against its `AT_EXECFN`); `0` when unknown.
pub const EXE: &str = "LIBSEAL_EXE";
/// Variables describing one process image (rewritten on every exec/spawn; a nested `seal`
/// must not inherit them).
/// The programs this process ran in its earlier images (hex): up to four 16-bit
/// [`image_name`]s, newest in the low bits, 0 for none. An image's streams and children are
/// keyed by its program's name and how many earlier images ran that name ([`image_ordinal`]),
/// not by how many images came before it: a wrapper that only execs (a version manager's
/// shim, `env`, `exec` in a script) changes nothing of what the program it runs sees.
pub const NAMES: &str = "LIBSEAL_NAMES";

pub const PER_PROCESS: [&str; 8] = [CLOCK, VPID, PPID, LINEAGE, CHILDREN, GEN, EXE, NAMES];

/// The 16-bit name of an image's program: a hash of the last component of the file name it
/// was started under (`AT_EXECFN`: `python3` whether reached as `/usr/bin/python3` or through
/// `~/.pyenv/versions/3.11.9/bin/python3`); never 0.
pub fn image_name(execfn: &[u8]) -> u16 {
    let base = match execfn.iter().rposition(|&c| c == b'/') {
        Some(i) => &execfn[i + 1..],
        None => execfn,
    };
    let h = crate::name_hash(base);
    ((h ^ (h >> 16) ^ (h >> 32) ^ (h >> 48)) as u16).max(1)
}

/// `names` ([`NAMES`]) with `name` appended (the oldest of four dropped).
pub const fn push_name(names: u64, name: u16) -> u64 {
    (names << 16) | name as u64
}

/// The ordinal of an image that runs program `name` after the images in `names`: the name and
/// how many of those ran it too (a program that re-execs itself gets a stream of its own).
pub fn image_ordinal(names: u64, name: u16) -> u64 {
    let earlier = (0..4)
        .filter(|i| (names >> (16 * i)) as u16 == name)
        .count() as u64;
    crate::mix64((name as u64) << 8 | earlier).max(1)
}

/// Room for one encoded number.
pub type NumBuf = [u8; 24];

impl<'a> Settings<'a> {
    /// Is the program at `path` sealed under `--only`/`--skip`? A glob with a `/` is matched
    /// against the whole path, any other against its last component.
    pub fn in_scope(&self, path: &[u8]) -> bool {
        let any = |globs: &[u8]| {
            globs
                .split(|&c| c == b'\n')
                .filter(|g| !g.is_empty())
                .any(|g| glob_match(g, subject(g, path)))
        };
        (self.only.is_empty() || any(self.only)) && !any(self.skip)
    }
}

fn subject<'p>(glob: &[u8], path: &'p [u8]) -> &'p [u8] {
    if glob.contains(&b'/') {
        path
    } else {
        path.rsplit(|&c| c == b'/').next().unwrap_or(path)
    }
}

/// Shell-style glob match: `*` any run of bytes, `?` one byte, everything else itself.
pub fn glob_match(glob: &[u8], s: &[u8]) -> bool {
    let (mut g, mut i) = (0, 0);
    let mut back: Option<(usize, usize)> = None;
    while i < s.len() {
        if g < glob.len() && (glob[g] == b'?' || glob[g] == s[i]) {
            g += 1;
            i += 1;
        } else if g < glob.len() && glob[g] == b'*' {
            back = Some((g, i));
            g += 1;
        } else if let Some((bg, bi)) = back {
            g = bg + 1;
            i = bi + 1;
            back = Some((bg, bi + 1));
        } else {
            return false;
        }
    }
    glob[g..].iter().all(|&c| c == b'*')
}

/// 2026-01-01T00:00:00Z: a fixed constant forever, so goldens pinned today pass next year.
pub const DEFAULT_EPOCH_NS: i64 = 1_767_225_600 * 1_000_000_000;
/// One microsecond per clock read.
pub const DEFAULT_TICK_NS: i64 = 1_000;
/// Clock reads after each wait that leave the clock still, unless configured
/// (`--spin-after`); docs/design.md says how this was chosen.
pub const DEFAULT_SPIN_AFTER: u32 = 0;
/// The host name a sealed process sees unless configured.
pub const DEFAULT_HOSTNAME: &[u8] = b"seal";
/// CPUs a sealed process sees unless configured (`--cpus`): a common CI runner's count.
pub const DEFAULT_CPUS: u32 = 4;
/// Bounds of `--cpus`.
pub const MIN_CPUS: u32 = 1;
pub const MAX_CPUS: u32 = 1024;

/// A family a user can unseal (`--unseal NAME`, `unseal = [...]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FamilyInfo {
    pub name: &'static str,
    /// The shim's [`flags`] bits this family sets when sealed; 0 for the launcher's own
    /// settings (environment and address layout).
    pub flags: u32,
    /// The census family of the calls it seals, if the shim seals any.
    pub census: Option<Family>,
}

const fn fam(name: &'static str, flags: u32, census: Option<Family>) -> FamilyInfo {
    FamilyInfo {
        name,
        flags,
        census,
    }
}

/// Every family, shim-sealed first. `time` covers waits too (they translate logical time).
pub const FAMILIES: &[FamilyInfo] = &[
    fam("time", flags::TIME | flags::WAIT, Some(Family::Time)),
    fam("random", flags::RANDOM, Some(Family::Random)),
    fam("pid", flags::PID, Some(Family::Pid)),
    fam("host", flags::HOST, Some(Family::Host)),
    fam("tempname", flags::TEMPNAME, Some(Family::Tempname)),
    fam("hashseed", 0, None),
    fam("tz", 0, None),
    fam("locale", 0, None),
    fam("env", 0, None),
    fam("aslr", 0, None),
    fam("layout", flags::LAYOUT, None),
    fam("files", flags::FILES, Some(Family::Files)),
    fam("net", flags::NET, Some(Family::Net)),
    fam("cpu", flags::CPU, Some(Family::Cpu)),
    fam("machine", flags::MACHINE, Some(Family::Machine)),
];

/// The family called `name`.
pub fn family(name: &str) -> Option<&'static FamilyInfo> {
    FAMILIES.iter().find(|f| f.name == name)
}

/// The shim flag bits for a run that unseals the families for which `unsealed` says true.
pub fn shim_flags(unsealed: impl Fn(&str) -> bool) -> u32 {
    FAMILIES
        .iter()
        .filter(|f| !unsealed(f.name))
        .fold(0, |acc, f| acc | f.flags)
}

/// Writes `v` in decimal into `out`, returning the length.
pub fn write_i64(v: i64, out: &mut [u8]) -> usize {
    if v < 0 {
        out[0] = b'-';
        1 + crate::write_u64(v.unsigned_abs(), &mut out[1..])
    } else {
        crate::write_u64(v as u64, out)
    }
}

/// Parses a decimal (optionally negative) integer.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let v = parse_u64(digits)?;
    if neg {
        0i64.checked_sub_unsigned(v)
    } else {
        i64::try_from(v).ok()
    }
}

/// Parses a decimal unsigned integer.
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    Some(v)
}

/// Parses up to 16 hex digits.
pub fn parse_hex(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return None,
        };
        v = (v << 4) | d as u64;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::collections::BTreeMap;
    use std::vec::Vec;

    use super::*;

    #[test]
    fn settings_round_trip_through_the_environment() {
        let s = Settings {
            run_dir: b"/dev/shm/seal-run-x",
            shim: b"/c/libseal.so",
            epoch_ns: -5,
            tick_ns: 1000,
            seed: u64::MAX,
            flags: 63,
            hostname: b"box",
            only: b"python3*\n/usr/bin/*",
            skip: b"",
            rate_ppm: 10_000_000,
            real_start_ns: 123_456,
            files_start_ns: 1_767_225_600_004_000_000,
            cpus: 16,
            spin_after: 7,
        };
        let mut env: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
        s.encode(|k, v| {
            env.insert(k, v.to_vec());
        });
        assert_eq!(env.len(), VARS.len());
        assert!(env.keys().all(|k| k.starts_with(PREFIX)));
        let back = Settings::decode(|k| env.get(k).map(|v| v.as_slice())).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn every_place_of_vars_is_taken_once() {
        for (i, a) in VARS.iter().enumerate() {
            assert!(
                a.starts_with(PREFIX),
                "place {i} of VARS is empty: a row's [N] is taken twice"
            );
            assert!(!VARS[i + 1..].contains(a), "{a} twice");
        }
    }

    #[test]
    fn no_run_dir_means_not_sealed_and_defaults_fill_gaps() {
        assert_eq!(Settings::decode(|_| None), None);
        assert_eq!(
            Settings::decode(|k| (k == RUN_DIR).then_some(&b""[..])),
            None
        );
        let s = Settings::decode(|k| (k == RUN_DIR).then_some(&b"/r"[..])).unwrap();
        assert_eq!(s.epoch_ns, DEFAULT_EPOCH_NS);
        assert_eq!(s.flags, flags::ALL_FAMILIES);
        assert_eq!(s.hostname, DEFAULT_HOSTNAME);
        assert_eq!(s.cpus, DEFAULT_CPUS);
        // Out of range: the default.
        let s = Settings::decode(|k| match k {
            RUN_DIR => Some(&b"/r"[..]),
            CPUS => Some(&b"0"[..]),
            _ => None,
        })
        .unwrap();
        assert_eq!(s.cpus, DEFAULT_CPUS);
    }

    #[test]
    fn the_family_table_gives_the_flags() {
        assert_eq!(shim_flags(|_| false), flags::ALL_FAMILIES | flags::LAYOUT);
        assert_eq!(
            shim_flags(|f| f == "time" || f == "tz"),
            (flags::ALL_FAMILIES | flags::LAYOUT) & !(flags::TIME | flags::WAIT)
        );
        assert_eq!(family("pid").unwrap().census, Some(Family::Pid));
        assert!(family("nope").is_none());
    }

    #[test]
    fn globs_and_scope() {
        assert!(glob_match(b"python3*", b"python3.11"));
        assert!(glob_match(b"*", b""));
        assert!(glob_match(b"a*b*c", b"aXbYbZc"));
        assert!(glob_match(b"?at", b"cat"));
        assert!(!glob_match(b"python3*", b"bash"));
        assert!(!glob_match(b"a*b", b"acbd"));
        let mut s = Settings::decode(|k| (k == RUN_DIR).then_some(&b"/r"[..])).unwrap();
        assert!(s.in_scope(b"/usr/bin/date"));
        s.only = b"python3*";
        assert!(s.in_scope(b"/root/.pyenv/versions/3.11.7/bin/python3.11"));
        assert!(!s.in_scope(b"/usr/bin/date"));
        s.only = b"";
        s.skip = b"date\n/opt/*";
        assert!(!s.in_scope(b"/usr/bin/date"));
        assert!(!s.in_scope(b"/opt/tool"));
        assert!(s.in_scope(b"/usr/bin/env"));
    }

    #[test]
    fn the_pad_makes_one_stack_size() {
        // What create_elf_tables does to the stack pointer, from a top ≡ 8 (mod 16).
        let sp = |strings: usize, pointers: usize| {
            let top = 0x7fff_ffff_f000usize - 8;
            let p = (top - strings) & !15;
            let p = p - 7 - 16 - 8 * 40; // platform, AT_RANDOM, an auxv of 20 pairs
            (p - 8 * (pointers + 3)) & !15
        };
        let mut seen = std::collections::BTreeSet::new();
        for strings in [0usize, 1, 7, 8, 9, 15, 16, 100, 4095, 30_000] {
            for pointers in [0usize, 1, 2, 3, 17, 100, 101] {
                let pad = pad_entry_len(strings, pointers);
                assert!(pad >= PAD.len() + 2);
                assert!(pad < LAYOUT_BLOCK + 64, "{pad}");
                seen.insert(sp(strings + pad, pointers + 1));
            }
        }
        assert_eq!(seen.len(), 1, "{seen:x?}");
        // Past one block, the next multiple.
        let big = pad_entry_len(LAYOUT_BLOCK, 10);
        assert_eq!(
            sp(LAYOUT_BLOCK + big, 11) + LAYOUT_BLOCK,
            seen.into_iter().next().unwrap()
        );
    }

    #[test]
    fn numbers() {
        let mut b = [0u8; 24];
        let n = write_i64(i64::MIN, &mut b);
        assert_eq!(parse_i64(&b[..n]), Some(i64::MIN));
        assert_eq!(parse_i64(b"-"), None);
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_hex(b"abc"), Some(0xabc));
    }
}
