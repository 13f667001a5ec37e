//! The run's settings and the image's identity, as the supervisor reads them from its
//! `LIBSEAL_*` environment, and the entropy streams it draws from.

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;

use seal_abi::flags;

/// What a sealed `uname` says for release and version (family `machine`), as libseal does.
use seal_abi::machine_file::{RELEASE, VERSION};

/// The run's settings and the image's identity, from the `LIBSEAL_*` environment.
pub struct World {
    pub(super) epoch_ns: i64,
    pub(super) tick_ns: i64,
    /// `--spin-after`: wall-clock reads after each wait that leave the clock still.
    pub(super) spin_after: u32,
    pub(super) seed: u64,
    pub(super) flags: u32,
    pub(super) hostname: Vec<u8>,
    pub(super) cpus: u32,
    pub(super) clock: i64,
    pub(super) vpid: i32,
    pub(super) ppid: i32,
    pub(super) lineage: u64,
    pub(super) gen: u32,
    pub(super) run_dir: Option<std::path::PathBuf>,
    /// The run's start for file times (`LIBSEAL_FILES_START`; 0: unknown).
    pub(super) files_start_ns: i64,
}

impl World {
    pub fn from_env() -> World {
        World::from_lookup(|n| Some(std::env::var_os(n)?.as_bytes().to_vec()))
    }

    /// The world of `vars` (name, value), a request's variables.
    pub fn from_vars(vars: &[(std::ffi::OsString, std::ffi::OsString)]) -> World {
        World::from_lookup(|n| {
            let v = vars.iter().rev().find(|(k, _)| k.as_os_str() == n)?;
            Some(v.1.as_bytes().to_vec())
        })
    }

    /// The world of the variables `get` gives.
    fn from_lookup(get: impl Fn(&str) -> Option<Vec<u8>>) -> World {
        use seal_abi::settings as s;
        let vars: HashMap<&'static str, Vec<u8>> = s::VARS
            .iter()
            .chain(s::PER_PROCESS.iter())
            .filter_map(|&n| Some((n, get(n)?)))
            .collect();
        // No run directory (cannot happen: libseal starts the supervisor in a run): the
        // defaults, with a run directory to decode them.
        let settings = s::Settings::decode(|n| match vars.get(n) {
            Some(v) => Some(v.as_slice()),
            None if n == s::RUN_DIR => Some(b"-"),
            None => None,
        })
        .expect("a run directory is given");
        let text = |n: &str| {
            vars.get(n)
                .and_then(|v| std::str::from_utf8(v).ok())
                .map(str::to_owned)
        };
        let dec = |n: &str| text(n).and_then(|v| v.parse::<i64>().ok());
        World {
            epoch_ns: settings.epoch_ns,
            tick_ns: settings.tick_ns,
            spin_after: settings.spin_after,
            seed: settings.seed,
            flags: settings.flags,
            hostname: settings.hostname.to_vec(),
            cpus: settings.cpus,
            clock: dec(s::CLOCK).unwrap_or(0),
            vpid: dec(s::VPID).unwrap_or(0) as i32,
            ppid: dec(s::PPID).unwrap_or(0) as i32,
            lineage: text(s::LINEAGE)
                .and_then(|v| u64::from_str_radix(&v, 16).ok())
                .unwrap_or(seal_abi::ROOT_LINEAGE),
            gen: dec(s::GEN).unwrap_or(0) as u32,
            run_dir: text(s::RUN_DIR).map(Into::into),
            files_start_ns: settings.files_start_ns,
        }
    }

    /// The identity libseal gives a process that supervises itself.
    pub fn set_identity(&mut self, vpid: i32, ppid: i32) {
        (self.vpid, self.ppid) = (vpid, ppid);
    }

    pub(super) fn sealed(&self, family: u32) -> bool {
        self.flags & family != 0
    }

    /// The 16 `AT_RANDOM` bytes of the image.
    pub fn at_random(&self) -> [u8; 16] {
        let mut s = Stream::new(self.seed, self.lineage ^ 0x6175_7876_5f72_6e64);
        let mut b = [0u8; 16];
        s.fill(&mut b);
        b
    }

    /// The sealed `uname` (a `struct utsname`'s bytes), or `None` when the kernel's fails.
    pub fn uname(&self) -> Option<Vec<u8>> {
        // SAFETY: utsname is plain data; uname fills it.
        let mut u: libc::utsname = unsafe { std::mem::zeroed() };
        // SAFETY: a utsname we own.
        if unsafe { libc::uname(&mut u) } != 0 {
            return None;
        }
        let set = |field: &mut [libc::c_char; 65], v: &[u8]| {
            field.fill(0);
            for (d, s) in field.iter_mut().zip(v.iter().take(64)) {
                *d = *s as libc::c_char;
            }
        };
        set(&mut u.nodename, &self.hostname);
        set(&mut u.domainname, b"(none)");
        if self.sealed(flags::MACHINE) {
            set(&mut u.release, RELEASE);
            set(&mut u.version, VERSION);
        }
        // SAFETY: utsname is plain data, read as bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                (&u as *const libc::utsname).cast::<u8>(),
                std::mem::size_of::<libc::utsname>(),
            )
        };
        Some(bytes.to_vec())
    }

    /// The sealed affinity mask's bytes: CPUs `0..cpus`, in whole 64-bit words.
    pub fn affinity(&self) -> Vec<u8> {
        let words = (self.cpus as usize).div_ceil(64);
        let mut m = vec![0u64; words];
        for cpu in 0..self.cpus as usize {
            m[cpu / 64] |= 1 << (cpu % 64);
        }
        m.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// Is the image's clock to be served by system call (its vDSO removed)?
    pub fn seal_clocks(&self) -> bool {
        self.sealed(flags::TIME)
    }
}

/// An entropy stream: `mix64` in counter mode, keyed by the seed and a stream id.
pub(super) struct Stream {
    key: u64,
    pub(super) n: u64,
}

impl Stream {
    pub(super) fn new(seed: u64, id: u64) -> Stream {
        Stream {
            key: seal_abi::mix64(seed ^ seal_abi::mix64(id)),
            n: 0,
        }
    }
    pub(super) fn fill(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(8) {
            let v = seal_abi::mix64(self.key ^ seal_abi::mix64(self.n)).to_le_bytes();
            self.n += 1;
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}
