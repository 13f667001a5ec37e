//! OpenSSL's public generator (`RAND_bytes`, `RAND_priv_bytes` and their `_ex` forms),
//! answered from the thread's stream while `random` is sealed.
//!
//! Why: OpenSSL 3's DRBG is seeded from `getrandom` (sealed), but its nonce also takes the
//! heap address of the DRBG's own state (`prov_drbg_get_nonce`: `data.drbg = drbg`). Every
//! string a program copied to the heap before it first drew shifts that address, so values
//! drawn through OpenSSL moved with the length of the command line (Node copies its arguments
//! into one malloc'ed block in `uv_setup_args`), the environment and the working directory
//! (PHP imports both), while each stayed the same run to run. Serving the generator's public
//! entry points from the sealed stream takes the address out whatever the program copied.
//!
//! Two ways in:
//! * **libcrypto loaded as a library** (PHP, Ruby's `openssl`, Python's `ssl`, `curl`): the
//!   exported hooks below come first in the global scope, so calls from programs, from libssl
//!   and from libcrypto itself (its internal calls go through its PLT) reach them.
//! * **OpenSSL linked into the program** (Node: `RAND_bytes` is in the `node` executable,
//!   whose own calls bind directly and never reach a preload): at image start, every loaded
//!   object other than a libcrypto and libseal that *exports* these names gets its copies'
//!   first bytes replaced with a jump to [`static_rand_bytes`] and its siblings. An object
//!   that links OpenSSL without exporting it (most static builds, Go, a Rust binary with
//!   vendored OpenSSL) is not found; docs/limits.md says so.
//!
//! With `random` unsealed nothing is patched and the hooks call the real functions. A program
//! that set its own method (`RAND_set_rand_method`, an engine, a provider of its own) gets
//! the sealed stream all the same while sealed.

use libc::{c_int, c_uint, c_void, size_t};
use seal_abi::{flags, Fid, NO_DETAIL};

use crate::core::{census, config, sys};
use crate::hook;

/// Fills `num` bytes at `buf` from the thread's stream, with `RAND_bytes`' answer: 1, or 0
/// for a negative count or a null buffer (as OpenSSL fails them).
///
/// # Safety
/// `buf` is writable for `num` bytes when `num > 0`.
unsafe fn draw(buf: *mut u8, num: i64) -> c_int {
    if num < 0 || (num > 0 && buf.is_null()) {
        return 0;
    }
    if num > 0 {
        // SAFETY: per the contract.
        super::fill(unsafe { core::slice::from_raw_parts_mut(buf, num as usize) });
    }
    1
}

/// One of OpenSSL's two public generators (`RAND_bytes` or `RAND_priv_bytes`): the exported
/// hooks of its plain and `_ex` forms, counted as `fid`, and what a patched `plain`/`ex` in a
/// program's own copy of OpenSSL jumps to (`static_plain`, `static_ex`: see [`targets`]).
macro_rules! generator {
    ($plain:ident, $ex:ident, $fid:ident, $static_plain:ident, $static_ex:ident) => {
        hook! {
            /// # Safety
            #[doc = concat!("As OpenSSL's `", stringify!($plain), "`: `buf` writable for `num` bytes.")]
            #[allow(non_snake_case)]
            fn $plain(buf: *mut u8, num: c_int) -> c_int;
            fid = $fid;
            // SAFETY: the caller's contract.
            |real| if config::sealed(flags::RANDOM) { unsafe { draw(buf, num as i64) } } else { real(buf, num) }
        }

        hook! {
            /// # Safety
            #[doc = concat!("As OpenSSL 3's `", stringify!($ex), "`: `buf` writable for `num` bytes.")]
            #[allow(non_snake_case)]
            fn $ex(ctx: *mut c_void, buf: *mut u8, num: size_t, strength: c_uint) -> c_int;
            fid = $fid;
            |real| if config::sealed(flags::RANDOM) {
                // SAFETY: the caller's contract; a size past i64 is refused by `draw`.
                unsafe { draw(buf, num as i64) }
            } else {
                real(ctx, buf, num, strength)
            }
        }

        #[doc = concat!("What a patched `", stringify!($plain), "` in a program's own copy of OpenSSL jumps to.")]
        ///
        /// # Safety
        #[doc = concat!("As `", stringify!($plain), "`.")]
        unsafe extern "C" fn $static_plain(buf: *mut u8, num: c_int) -> c_int {
            census::count(Fid::$fid, NO_DETAIL, crate::caller!());
            // SAFETY: the caller's contract.
            unsafe { draw(buf, num as i64) }
        }

        #[doc = concat!("What a patched `", stringify!($ex), "` jumps to.")]
        ///
        /// # Safety
        #[doc = concat!("As `", stringify!($ex), "`.")]
        unsafe extern "C" fn $static_ex(
            _ctx: *mut c_void,
            buf: *mut u8,
            num: size_t,
            _strength: c_uint,
        ) -> c_int {
            census::count(Fid::$fid, NO_DETAIL, crate::caller!());
            // SAFETY: the caller's contract.
            unsafe { draw(buf, num as i64) }
        }
    };
}

generator!(
    RAND_bytes,
    RAND_bytes_ex,
    RandBytes,
    static_rand_bytes,
    static_rand_bytes_ex
);
generator!(
    RAND_priv_bytes,
    RAND_priv_bytes_ex,
    RandPrivBytes,
    static_rand_priv_bytes,
    static_rand_priv_bytes_ex
);

/// The names a program's own OpenSSL is patched at, and where each then jumps.
fn targets() -> [(&'static [u8], u64); 4] {
    [
        (
            b"RAND_bytes",
            static_rand_bytes as *const () as usize as u64,
        ),
        (
            b"RAND_priv_bytes",
            static_rand_priv_bytes as *const () as usize as u64,
        ),
        (
            b"RAND_bytes_ex",
            static_rand_bytes_ex as *const () as usize as u64,
        ),
        (
            b"RAND_priv_bytes_ex",
            static_rand_priv_bytes_ex as *const () as usize as u64,
        ),
    ]
}

/// `jmp qword ptr [rip+0]` followed by the 8-byte target: 14 bytes, no register touched.
const JUMP_LEN: usize = 14;

/// Patches the copies of OpenSSL's generator that loaded objects carry themselves (at image
/// start, before `main`, from `crate::on_process_start`). Nothing when `random` is unsealed.
pub fn patch_linked_copies() {
    if !config::sealed(flags::RANDOM) {
        return;
    }
    // SAFETY: dl_iterate_phdr calls back synchronously with valid info structs.
    unsafe { libc::dl_iterate_phdr(Some(object_cb), core::ptr::null_mut()) };
}

unsafe extern "C" fn object_cb(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    _data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: dl_iterate_phdr hands a valid info for a loaded object.
    let info = unsafe { &*info };
    // SAFETY: dlpi_name is a NUL-terminated string or null.
    let name = unsafe { sys::cstr(info.dlpi_name) };
    let base = match name.iter().rposition(|&b| b == b'/') {
        Some(i) => &name[i + 1..],
        None => name,
    };
    // A shared libcrypto is reached through the hooks above; libseal exports the names as
    // those hooks; the vDSO exports no such names.
    if base.starts_with(b"libcrypto")
        || base.starts_with(b"linux-vdso")
        || object_contains(info, object_cb as *const () as usize as u64)
    {
        return 0;
    }
    // SAFETY: info describes a loaded object whose tables stay mapped while we look.
    let Some(syms) = (unsafe { crate::elf::DynSyms::of(info) }) else {
        return 0;
    };
    for (sym, to) in targets() {
        let Some(s) = syms.lookup(sym) else { continue };
        let at = syms.bias.wrapping_add(s.st_value);
        // STT_FUNC (2) or STT_GNU_IFUNC (10): only a plain function is patched.
        let is_func = s.st_info & 0xf == 2;
        if !is_func || (s.st_size as usize) < JUMP_LEN {
            continue;
        }
        // SAFETY: `at` is the start of a defined function of at least JUMP_LEN bytes in a
        // loaded object's text; the image has not reached `main`, so no thread runs it.
        if !unsafe { write_jump(at, to) } {
            report_unpatched(name);
            return 0;
        }
    }
    0
}

/// Does one of `info`'s loaded segments hold `addr`?
fn object_contains(info: &libc::dl_phdr_info, addr: u64) -> bool {
    (0..info.dlpi_phnum as usize).any(|i| {
        // SAFETY: dlpi_phdr has dlpi_phnum entries.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        let lo = info.dlpi_addr.wrapping_add(ph.p_vaddr);
        ph.p_type == libc::PT_LOAD && lo <= addr && addr < lo.wrapping_add(ph.p_memsz)
    })
}

/// Writes a jump to `to` over the first [`JUMP_LEN`] bytes at `at`, making the pages writable
/// for the write and executable, not writable, again after. False if the kernel refused.
///
/// # Safety
/// `at` starts a function of at least [`JUMP_LEN`] bytes that no thread is running.
unsafe fn write_jump(at: u64, to: u64) -> bool {
    let page = at & !4095;
    let end = (at + JUMP_LEN as u64 + 4095) & !4095;
    let len = (end - page) as usize;
    let rwx = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;
    // SAFETY: the pages are mapped text of a loaded object.
    if unsafe { libc::mprotect(page as *mut c_void, len, rwx) } != 0 {
        return false;
    }
    let mut code = [0u8; JUMP_LEN];
    code[..6].copy_from_slice(&[0xff, 0x25, 0, 0, 0, 0]);
    code[6..].copy_from_slice(&to.to_le_bytes());
    // SAFETY: the pages are writable now and `at..at+JUMP_LEN` lies in the function.
    unsafe { core::ptr::copy_nonoverlapping(code.as_ptr(), at as *mut u8, JUMP_LEN) };
    // SAFETY: as above; back to the text's own protection.
    unsafe { libc::mprotect(page as *mut c_void, len, libc::PROT_READ | libc::PROT_EXEC) == 0 }
}

/// Says on stderr, once per object, that its own OpenSSL could not be patched (its draws
/// stay OpenSSL's: they may move with argument, environment and directory lengths).
fn report_unpatched(name: &[u8]) {
    let mut b = sys::StackBuf::<512>::new();
    b.push(b"seal: warning: OpenSSL linked into ")
        .push(if name.is_empty() {
            b"the program"
        } else {
            name
        })
        .push(b" could not be sealed (its text is not writable); its random bytes are OpenSSL's\n");
    sys::write_all(2, b.as_bytes());
}
