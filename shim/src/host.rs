//! Host names: `gethostname`, `uname` and `getdomainname` answer with the run's fixed name
//! (`--hostname`, default `seal`) when the `host` family is sealed.
//!
//! `uname` calls the real function for the other fields (kernel release, machine…), then
//! replaces `nodename` with the sealed name and `domainname` with `(none)`, which is what an
//! unconfigured Linux host reports; `getdomainname` returns the same `(none)`. The sealed
//! `hostname` files (`/proc/sys/kernel/hostname`, `/etc/hostname`) are opened through
//! `crate::open`, which calls [`open_name_file`] and [`drop_kernel_name_write`]. Debian's `hostname` command calls `gethostname`; coreutils'
//! `uname -n`, Python's `socket.gethostname()`/`platform.node()`, Node's `os.hostname()` and
//! the JVM's `InetAddress.getLocalHost()` all land on these entry points.

/// The NIS domain name a sealed process sees.
pub const DOMAINNAME: &[u8] = b"(none)";

/// The NIS domain name a sealed process sees now: set inside the run, else [`DOMAINNAME`].
pub fn domainname(out: &mut [u8; seal_abi::NAME_MAX]) -> &[u8] {
    match crate::core::world::name(crate::core::world::Name::Domain, out) {
        Some(n) => &out[..n],
        None => DOMAINNAME,
    }
}

/// `sethostname`/`setdomainname` on the sealed world, in the kernel's order of checks.
///
/// # Safety
/// `name` null or valid for `len` bytes.
pub unsafe fn set_name(
    which: crate::core::world::Name,
    name: *const libc::c_char,
    len: usize,
) -> Result<(), i32> {
    if !crate::core::world::may(crate::core::world::CAP_SYS_ADMIN) {
        return Err(libc::EPERM);
    }
    if len > seal_abi::NAME_MAX {
        return Err(libc::EINVAL);
    }
    if name.is_null() && len > 0 {
        return Err(libc::EFAULT);
    }
    let bytes = if len == 0 {
        &[][..]
    } else {
        // SAFETY: per the contract.
        unsafe { core::slice::from_raw_parts(name as *const u8, len) }
    };
    crate::core::world::set_name(which, bytes)
}

/// The sealed host name file's contents: a memfd holding the name and a newline.
pub fn open_name_file(cloexec: bool) -> Result<i32, i32> {
    let mut b = crate::core::sys::StackBuf::<80>::new();
    let mut cur = [0u8; seal_abi::NAME_MAX];
    b.push(crate::core::world::hostname(&mut cur)).push(b"\n");
    crate::core::fd::memfd_with(b"seal-hostname\0", b.as_bytes(), cloexec)
}

/// An open of `/proc/sys/kernel/hostname` for writing (`oflags`), in a sealed process:
/// `Some(/dev/null or errno)` when the process may write it, `None` (the kernel refuses, as
/// bare) when it may not.
///
/// Writing the kernel's host name file would rename the machine (the kernel asks only for
/// write access to the root-owned file, no capability): the write goes to /dev/null instead,
/// and says so (sethostname changes the sealed name).
pub fn drop_kernel_name_write(oflags: i32) -> Option<Result<i32, i32>> {
    use crate::core::{census, sys, world};
    if !(sys::geteuid() == 0 || world::may(world::CAP_DAC_OVERRIDE)) {
        return None;
    }
    let m =
        b"a write to /proc/sys/kernel/hostname is dropped (sethostname changes the sealed name)";
    census::record_unsealed(seal_abi::unsealed::UNSUPPORTED_CALL, m);
    sys::warn(m);
    let acc = oflags & libc::O_ACCMODE;
    let fd = sys::open(b"/dev/null\0", acc | (oflags & libc::O_CLOEXEC), 0);
    Some(if fd >= 0 { Ok(fd) } else { Err(-fd) })
}

/// `gethostname` semantics (glibc): copy as much as fits of `name` plus its NUL into `out`;
/// `Err(ENAMETOOLONG)` when the whole name with its NUL does not fit.
pub fn copy_name(name: &[u8], out: &mut [u8]) -> Result<(), i32> {
    let need = name.len() + 1;
    let n = need.min(out.len());
    let mut with_nul = [0u8; 80];
    with_nul[..name.len().min(79)].copy_from_slice(&name[..name.len().min(79)]);
    out[..n].copy_from_slice(&with_nul[..n]);
    if need > out.len() {
        return Err(libc::ENAMETOOLONG);
    }
    Ok(())
}

/// Writes `name` NUL-padded into a `utsname` field.
pub fn set_field(field: &mut [libc::c_char], name: &[u8]) {
    let n = name.len().min(field.len() - 1);
    for (i, f) in field.iter_mut().enumerate() {
        *f = if i < n { name[i] as libc::c_char } else { 0 };
    }
}

/// Is `node` the sealed host name (ASCII case-insensitive, one trailing dot allowed)?
pub fn is_sealed_name(node: &[u8], name: &[u8]) -> bool {
    let node = node.strip_suffix(b".").unwrap_or(node);
    !name.is_empty() && node.eq_ignore_ascii_case(name)
}

#[cfg(not(test))]
pub(crate) mod hooks {
    use core::sync::atomic::{AtomicU8, Ordering::Relaxed};

    use libc::{c_char, c_int, size_t};
    use seal_abi::{flags, Fid, NAME_MAX, NO_DETAIL};

    use super::{copy_name, domainname, is_sealed_name, set_field};
    use crate::core::{census, config, sys, world};
    use crate::hook;

    const LOCALHOST: *const c_char = c"localhost".as_ptr();

    /// Should a lookup of `node` be answered as the sealed host (resolving like `localhost`)?
    ///
    /// # Safety
    /// `node` is null or a NUL-terminated string.
    unsafe fn resolves_sealed(node: *const libc::c_char) -> bool {
        let mut cur = [0u8; NAME_MAX];
        // SAFETY: per the contract.
        !node.is_null()
            && config::sealed(flags::HOST)
            && is_sealed_name(unsafe { sys::cstr(node) }, world::hostname(&mut cur))
    }

    /// The sealed name as a C string that lives as long as the process (a `hostent`'s
    /// `h_name`): the configured one, or a copy of the one set inside the run.
    fn sealed_cname() -> *mut libc::c_char {
        static SET: [AtomicU8; NAME_MAX + 1] = [const { AtomicU8::new(0) }; NAME_MAX + 1];
        let mut cur = [0u8; NAME_MAX];
        match world::name(world::Name::Host, &mut cur) {
            None => config::HOSTNAME.get_cstr().as_ptr() as *mut libc::c_char,
            Some(n) => {
                for (i, slot) in SET.iter().enumerate() {
                    slot.store(if i < n { cur[i] } else { 0 }, Relaxed);
                }
                SET.as_ptr() as *mut libc::c_char
            }
        }
    }

    use crate::core::sys::set_errno;

    /// 0, or -1 with `errno`.
    fn ret(r: Result<(), i32>) -> c_int {
        match r {
            Ok(()) => 0,
            Err(e) => {
                set_errno(e);
                -1
            }
        }
    }

    /// Copies the sealed name that `pick` gives into the caller's `len` bytes at `name`, as
    /// `gethostname` does; `None` when `host` is not sealed or there is no buffer (the real
    /// function then answers).
    ///
    /// # Safety
    /// `name` null or valid for `len` bytes.
    unsafe fn copy_sealed(
        name: *mut c_char,
        len: size_t,
        pick: impl FnOnce(&mut [u8; NAME_MAX]) -> &[u8],
    ) -> Option<Result<(), i32>> {
        if !config::sealed(flags::HOST) || name.is_null() {
            return None;
        }
        // SAFETY: non-null, `len` writable bytes per the contract.
        let out = unsafe { core::slice::from_raw_parts_mut(name as *mut u8, len) };
        let mut cur = [0u8; NAME_MAX];
        Some(copy_name(pick(&mut cur), out))
    }

    hook! {
        /// # Safety
        /// As `gethostname(2)`: `name` valid for `len` bytes.
        fn gethostname(name: *mut c_char, len: size_t) -> c_int;
        fid = Gethostname;
        // SAFETY: forwarded contract.
        |real| unsafe { copy_sealed(name, len, world::hostname) }.map_or_else(|| real(name, len), ret)
    }

    /// The `host` family's part of a sealed `uname`: the node and domain names.
    pub fn seal_uname_host(u: &mut libc::utsname) {
        if config::sealed(flags::HOST) {
            let mut cur = [0u8; NAME_MAX];
            set_field(&mut u.nodename, world::hostname(&mut cur));
            set_field(&mut u.domainname, domainname(&mut cur));
        }
    }

    hook! {
        /// The node and domain names are the `host` family's; the release, version and
        /// machine family `machine`'s (counted under each).
        ///
        /// # Safety
        /// As `uname(2)`.
        fn uname(buf: *mut libc::utsname) -> c_int;
        caller = ra;
        |real| {
            census::count(Fid::Uname, NO_DETAIL, ra);
            census::count(Fid::UnameMachine, NO_DETAIL, ra);
            let r = real(buf);
            if r == 0 && !buf.is_null() {
                // SAFETY: the real uname filled it, so it is a valid utsname.
                let u = unsafe { &mut *buf };
                seal_uname_host(u);
                if crate::machine::sealed() {
                    crate::machine::set_uname(u);
                }
            }
            r
        }
    }

    hook! {
        /// # Safety
        /// As `getdomainname(2)`.
        fn getdomainname(name: *mut c_char, len: size_t) -> c_int;
        fid = Getdomainname;
        // glibc copies min(len, strlen + 1) bytes and never fails for a short buffer.
        // SAFETY: forwarded contract.
        |real| unsafe { copy_sealed(name, len, domainname) }.map_or_else(|| real(name, len), |_| 0)
    }

    hook! {
        /// The sealed name resolves like `localhost` (a sealed program asking for its own
        /// address, as the JVM's `InetAddress.getLocalHost()` and `hostname -f` do, must not
        /// fail because the name is not in DNS); its canonical name stays the sealed name.
        /// Counted only for the sealed name.
        ///
        /// # Safety
        /// As `getaddrinfo(3)`.
        fn getaddrinfo(
            node: *const c_char,
            service: *const c_char,
            hints: *const libc::addrinfo,
            res: *mut *mut libc::addrinfo,
        ) -> c_int;
        caller = ra;
        |real| {
            // SAFETY: forwarded contract.
            if !unsafe { resolves_sealed(node) } {
                return real(node, service, hints, res);
            }
            census::count(Fid::Getaddrinfo, NO_DETAIL, ra);
            let r = real(LOCALHOST, service, hints, res);
            // SAFETY: on success *res is glibc's list; its canonname is malloc'ed
            // (freeaddrinfo frees it), so replacing it with another malloc'ed string keeps
            // that contract.
            unsafe {
                if r == 0 && !res.is_null() && !(*res).is_null() && !(**res).ai_canonname.is_null()
                {
                    let mut cur = [0u8; NAME_MAX];
                    let name = world::hostname(&mut cur);
                    let copy = libc::malloc(name.len() + 1) as *mut u8;
                    if !copy.is_null() {
                        core::ptr::copy_nonoverlapping(name.as_ptr(), copy, name.len());
                        *copy.add(name.len()) = 0;
                        libc::free((**res).ai_canonname as *mut libc::c_void);
                        (**res).ai_canonname = copy as *mut c_char;
                    }
                }
            }
            r
        }
    }

    /// A `gethostbyname`-style lookup: the sealed name is counted and looked up as
    /// `localhost`, and the `hostent` that `lookup` returns gets the sealed canonical name.
    ///
    /// # Safety
    /// `name` null or a NUL-terminated string; `lookup` returns null or a valid `hostent`.
    #[inline(always)]
    unsafe fn by_name(
        name: *const c_char,
        ra: u64,
        lookup: impl FnOnce(*const c_char) -> *mut libc::hostent,
    ) -> *mut libc::hostent {
        // SAFETY: per the contract.
        if !unsafe { resolves_sealed(name) } {
            return lookup(name);
        }
        census::count(Fid::Gethostbyname, NO_DETAIL, ra);
        let h = lookup(LOCALHOST);
        if !h.is_null() {
            // SAFETY: a valid hostent per the contract.
            unsafe { (*h).h_name = sealed_cname() };
        }
        h
    }

    /// `plain` and its reentrant form `reentrant` (both with an address family `af` after the
    /// name, for `gethostbyname2`): the lookups of [`by_name`] and [`by_name_r`].
    macro_rules! by_name_hooks {
        ($plain:ident, $reentrant:ident $(, $af:ident)?) => {
            hook! {
                /// # Safety
                #[doc = concat!("As `", stringify!($plain), "(3)`.")]
                fn $plain(name: *const c_char $(, $af: c_int)?) -> *mut libc::hostent;
                caller = ra;
                // SAFETY: forwarded contract; the result is libc's static hostent.
                |real| unsafe { by_name(name, ra, |n| real(n $(, $af)?)) }
            }

            hook! {
                /// # Safety
                #[doc = concat!("As `", stringify!($reentrant), "(3)`.")]
                fn $reentrant(
                    name: *const c_char,
                    $($af: c_int,)?
                    ret: *mut libc::hostent,
                    buf: *mut c_char,
                    buflen: size_t,
                    result: *mut *mut libc::hostent,
                    h_errnop: *mut c_int,
                ) -> c_int;
                caller = ra;
                // SAFETY: forwarded contract.
                |real| unsafe {
                    by_name_r(name, result, ra, |n| real(n, $($af,)? ret, buf, buflen, result, h_errnop))
                }
            }
        };
    }

    by_name_hooks!(gethostbyname, gethostbyname_r);
    by_name_hooks!(gethostbyname2, gethostbyname2_r, af);

    /// The reentrant [`by_name`]: `lookup` fills `*result` on success.
    ///
    /// # Safety
    /// `name` null or a NUL-terminated string; `result` null or valid, and on success
    /// `*result` is the caller's `hostent`.
    #[inline(always)]
    unsafe fn by_name_r(
        name: *const c_char,
        result: *mut *mut libc::hostent,
        ra: u64,
        lookup: impl FnOnce(*const c_char) -> c_int,
    ) -> c_int {
        // SAFETY: per the contract.
        let sealed = unsafe { resolves_sealed(name) };
        if sealed {
            census::count(Fid::Gethostbyname, NO_DETAIL, ra);
        }
        let r = lookup(if sealed { LOCALHOST } else { name });
        // SAFETY: on success *result is `ret`, the caller's struct.
        unsafe {
            if sealed && r == 0 && !result.is_null() && !(*result).is_null() {
                (**result).h_name = sealed_cname();
            }
        }
        r
    }

    /// Shared by `sethostname`, `setdomainname` and their `syscall()` forms: while `host` is
    /// sealed the name changes for every process of the run, and the machine keeps its own.
    ///
    /// # Safety
    /// `name` null or valid for `len` bytes.
    pub unsafe fn set_name_impl(
        which: world::Name,
        name: *const c_char,
        len: size_t,
        fid: Fid,
        ra: u64,
    ) -> Option<c_int> {
        census::count(fid, NO_DETAIL, ra);
        if !config::sealed(flags::HOST) {
            return None;
        }
        // SAFETY: per the contract.
        Some(ret(unsafe { super::set_name(which, name, len) }))
    }

    hook! {
        /// # Safety
        /// As `sethostname(2)`.
        fn sethostname(name: *const c_char, len: size_t) -> c_int;
        caller = ra;
        // SAFETY: forwarded contract.
        |real| unsafe { set_name_impl(world::Name::Host, name, len, Fid::Sethostname, ra) }
            .unwrap_or_else(|| real(name, len))
    }

    hook! {
        /// # Safety
        /// As `setdomainname(2)`.
        fn setdomainname(name: *const c_char, len: size_t) -> c_int;
        caller = ra;
        // SAFETY: forwarded contract.
        |real| unsafe { set_name_impl(world::Name::Domain, name, len, Fid::Setdomainname, ra) }
            .unwrap_or_else(|| real(name, len))
    }

    /// `syscall(SYS_sethostname | SYS_setdomainname, …)` (`crate::syscall`'s route table).
    ///
    /// # Safety
    /// As `syscall(2)` for `n` with `a`.
    pub unsafe fn sys_set_name(
        n: libc::c_long,
        a: [libc::c_long; 6],
        ra: u64,
    ) -> Option<libc::c_long> {
        let which = if n == libc::SYS_sethostname {
            world::Name::Host
        } else {
            world::Name::Domain
        };
        // SAFETY: the caller's arguments, forwarded with the same meaning.
        unsafe {
            set_name_impl(
                which,
                a[0] as *const c_char,
                a[1] as size_t,
                Fid::SysSethostname,
                ra,
            )
        }
        .map(|r| r as libc::c_long)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_like_glibc() {
        let mut b = [0xaau8; 8];
        assert_eq!(copy_name(b"seal", &mut b), Ok(()));
        assert_eq!(&b[..5], b"seal\0");
        let mut s = [0xaau8; 4];
        assert_eq!(copy_name(b"seal", &mut s), Err(libc::ENAMETOOLONG));
        assert_eq!(&s, b"seal");
        let mut f = [1 as libc::c_char; 65];
        set_field(&mut f, b"seal");
        assert_eq!(f[3], b'l' as libc::c_char);
        assert!(f[4..].iter().all(|&c| c == 0));
    }

    #[test]
    fn sealed_name_matches_case_insensitively() {
        assert!(is_sealed_name(b"SEAL", b"seal"));
        assert!(is_sealed_name(b"seal.", b"seal"));
        assert!(!is_sealed_name(b"seal.example", b"seal"));
        assert!(!is_sealed_name(b"localhost", b"seal"));
        assert!(!is_sealed_name(b"", b""));
    }
}
