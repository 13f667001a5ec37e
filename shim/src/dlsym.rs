//! `dlsym`, interposed: a lookup on a handle answers as a direct call would bind.
//!
//! A program that calls `time` binds to libseal's `time` (it is preloaded, so first in the
//! global scope). A program that asks a *handle* for it, `dlsym(dlopen("libc.so.6"), "time")`
//! (Python's `ctypes.CDLL("libc.so.6").time`, plugin loaders, FFI layers), searches only that
//! handle's scope and gets glibc's own function: the real clock, in a sealed run. So libseal
//! interposes `dlsym` itself. When a lookup on a real handle lands in libc (or is one of the
//! few names libseal interposes in another library: libuuid's) and libseal interposes the
//! same name, the answer is libseal's function; every other lookup is glibc's answer
//! unchanged. The JVM's `JNI_CreateJavaVM` is the other routed name ([`crate::jvm`]).
//!
//! `dlsym` is a trampoline that calls [`route`] and then *tail-jumps* to glibc's `dlsym`: a
//! `dlsym(RTLD_NEXT, …)` resolves relative to its caller's return address, which therefore
//! must stay the caller's (also for libseal's own `real!` lookups, which reach glibc through
//! this same trampoline with libseal's return address intact). `RTLD_NEXT` and
//! `RTLD_DEFAULT` lookups are never routed: they already follow the global scope. It is the
//! one exported entry point not written with `hook!`, which cannot emit a tail jump.
//!
//! Not covered (docs/limits.md): `dlvsym`, and `dlmopen`, whose new namespace has a libc of
//! its own that no preload reaches.

use core::sync::atomic::{AtomicUsize, Ordering::*};

use crate::core::sys;

/// glibc's `dlsym`.
pub type Dlsym = unsafe extern "C" fn(*mut libc::c_void, *const libc::c_char) -> usize;

/// glibc's `dlsym`, resolved on the first call (never through the trampoline).
#[link_section = ".data.seal_hot"]
static SEAL_REAL_DLSYM: AtomicUsize = AtomicUsize::new(0);

/// `dlsym`: asks [`route`] whether this lookup gets a sealed answer; if not, tail-jumps to
/// glibc's `dlsym` with the caller's return address still on the stack.
///
/// # Safety
/// As `dlsym(3)`.
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn dlsym(
    _handle: *mut libc::c_void,
    _name: *const libc::c_char,
) -> *mut libc::c_void {
    core::arch::naked_asm!(
        // rsp is 8 mod 16 here; two pushes and 8 bytes realign it for the call.
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "call {route}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "test rax, rax",
        "jnz 2f",
        "jmp qword ptr [rip + {real}]",
        "2:",
        "ret",
        route = sym route,
        real = sym SEAL_REAL_DLSYM,
    )
}

/// Makes sure glibc's `dlsym` is known, and returns the sealed answer for this lookup, or 0
/// for "ask glibc".
extern "C" fn route(handle: *mut libc::c_void, name: *const libc::c_char) -> usize {
    if SEAL_REAL_DLSYM.load(Relaxed) == 0 {
        resolve_real_dlsym();
    }
    // RTLD_DEFAULT / RTLD_NEXT lookups depend on the caller and follow the global scope,
    // where libseal already comes first: leave them to glibc.
    if name.is_null() || handle.is_null() || handle as isize == -1 {
        return 0;
    }
    // SAFETY: the value stored by resolve_real_dlsym is glibc's dlsym.
    let real = unsafe { core::mem::transmute::<usize, Dlsym>(SEAL_REAL_DLSYM.load(Relaxed)) };
    #[cfg(not(test))]
    {
        let f = crate::jvm::route(handle, name, real);
        if f != 0 {
            return f;
        }
    }
    as_bound(handle, name, real)
}

/// Names libseal interposes that live in a library other than libc, routed wherever the
/// handle finds them: libuuid's time-based uuids (Python 3.6's `uuid1()` looks them up in a
/// `ctypes.CDLL` of libuuid).
const LIBRARY_NAMES: [&[u8]; 2] = [b"uuid_generate_time\0", b"uuid_generate_time_safe\0"];

/// The answer of a lookup on `handle` when glibc's lies in libc (or is one of
/// [`LIBRARY_NAMES`]) and libseal interposes the name: libseal's function (what a direct call
/// binds to); otherwise 0.
fn as_bound(handle: *mut libc::c_void, name: *const libc::c_char, real: Dlsym) -> usize {
    // SAFETY: glibc's dlsym with the caller's handle and name.
    let f = unsafe { real(handle, name) };
    if f == 0 {
        return 0;
    }
    let r = ranges();
    // glibc's `time` and `gettimeofday` are IFUNCs that resolve into the vDSO.
    if !r.libc.contains(f) && !r.vdso.contains(f) && !LIBRARY_NAMES.iter().any(|n| is_name(name, n))
    {
        return 0;
    }
    // SAFETY: as above; the global scope lists the program, then libseal, then libc.
    let g = unsafe { real(libc::RTLD_DEFAULT, name) };
    if g != f && r.seal.contains(g) {
        g
    } else {
        0
    }
}

/// Whether the NUL-terminated `name` is `want` (which includes its NUL).
#[cfg_attr(test, allow(dead_code))]
pub fn is_name(name: *const libc::c_char, want: &[u8]) -> bool {
    for (i, &w) in want.iter().enumerate() {
        // SAFETY: a NUL-terminated string; we stop at its NUL (or at the first mismatch).
        let c = unsafe { *name.add(i) } as u8;
        if c != w {
            return false;
        }
        if c == 0 {
            break;
        }
    }
    true
}

#[cold]
fn resolve_real_dlsym() {
    extern "C" {
        fn dlvsym(
            handle: *mut libc::c_void,
            name: *const libc::c_char,
            version: *const libc::c_char,
        ) -> *mut libc::c_void;
    }
    for version in [&b"GLIBC_2.34\0"[..], b"GLIBC_2.2.5\0"] {
        // SAFETY: NUL-terminated strings; RTLD_NEXT is valid from inside a shared object.
        let p = unsafe {
            dlvsym(
                libc::RTLD_NEXT,
                c"dlsym".as_ptr(),
                version.as_ptr() as *const libc::c_char,
            )
        };
        if !p.is_null() {
            SEAL_REAL_DLSYM.store(p as usize, Relaxed);
            return;
        }
    }
    sys::write_all(2, b"libseal: cannot find the real dlsym in libc\n");
    sys::exit_group(125);
}

/// The address range one loaded object's segments cover.
#[derive(Clone, Copy, Default)]
struct Range {
    lo: usize,
    hi: usize,
}

impl Range {
    fn contains(self, a: usize) -> bool {
        self.lo <= a && a < self.hi
    }
}

#[derive(Clone, Copy, Default)]
struct Ranges {
    /// The object that holds glibc's `dlsym` (libc.so.6).
    libc: Range,
    /// libseal.
    seal: Range,
    /// The kernel's vDSO.
    vdso: Range,
}

impl Ranges {
    fn words(self) -> [usize; 6] {
        let Ranges { libc, seal, vdso } = self;
        [libc.lo, libc.hi, seal.lo, seal.hi, vdso.lo, vdso.hi]
    }

    fn of_words(w: [usize; 6]) -> Self {
        let range = |i: usize| Range {
            lo: w[i],
            hi: w[i + 1],
        };
        Ranges {
            libc: range(0),
            seal: range(2),
            vdso: range(4),
        }
    }
}

/// The [`Ranges`] once found, as their [`Ranges::words`]; word [`PUBLISHED`], libseal's `hi`,
/// is stored last (Release): non-zero once the others are in place.
static FOUND: [AtomicUsize; 6] = [const { AtomicUsize::new(0) }; 6];
const PUBLISHED: usize = 3;

/// libc's, libseal's and the vDSO's ranges, found once with `dl_iterate_phdr` (both stay mapped).
fn ranges() -> Ranges {
    if FOUND[PUBLISHED].load(Acquire) != 0 {
        return Ranges::of_words(core::array::from_fn(|i| FOUND[i].load(Relaxed)));
    }
    find_ranges()
}

#[cold]
fn find_ranges() -> Ranges {
    struct Search {
        libc_at: usize,
        seal_at: usize,
        vdso_at: usize,
        found: Ranges,
    }
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: the loader's description of one object, and our Search.
        let (info, s) = unsafe { (&*info, &mut *(data as *mut Search)) };
        let mut r = Range {
            lo: usize::MAX,
            hi: 0,
        };
        for i in 0..info.dlpi_phnum as usize {
            // SAFETY: dlpi_phdr holds dlpi_phnum program headers.
            let ph = unsafe { &*info.dlpi_phdr.add(i) };
            if ph.p_type == libc::PT_LOAD {
                let lo = (info.dlpi_addr as usize).wrapping_add(ph.p_vaddr as usize);
                r.lo = r.lo.min(lo);
                r.hi = r.hi.max(lo.wrapping_add(ph.p_memsz as usize));
            }
        }
        if r.contains(s.libc_at) {
            s.found.libc = r;
        }
        if r.contains(s.seal_at) {
            s.found.seal = r;
        }
        if s.vdso_at != 0 && r.contains(s.vdso_at) {
            s.found.vdso = r;
        }
        0
    }
    let mut s = Search {
        libc_at: SEAL_REAL_DLSYM.load(Relaxed),
        seal_at: route as *const () as usize,
        // SAFETY: getauxval has no preconditions; 0 when there is no vDSO.
        vdso_at: unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) } as usize,
        found: Ranges::default(),
    };
    // SAFETY: `each` only reads the loader's descriptions and writes `s`.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut s as *mut Search as *mut libc::c_void) };
    let f = s.found;
    if f.seal.hi != 0 {
        let words = f.words();
        for (i, w) in words
            .into_iter()
            .enumerate()
            .filter(|&(i, _)| i != PUBLISHED)
        {
            FOUND[i].store(w, Relaxed);
        }
        FOUND[PUBLISHED].store(words[PUBLISHED], Release);
    }
    f
}
