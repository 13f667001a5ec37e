//! Host names: `gethostname`, `uname` and `getdomainname` answer with the run's fixed name
//! (`--hostname`, default `seal`) when the `host` family is sealed.
//!
//! `uname` calls the real function for the other fields (kernel release, machine…), then
//! replaces `nodename` with the sealed name and `domainname` with `(none)`, which is what an
//! unconfigured Linux host reports; `getdomainname` returns the same `(none)`. The sealed
//! `hostname` files (`/proc/sys/kernel/hostname`, `/etc/hostname`) are served by the open
//! hooks in `random::device`. Debian's `hostname` command calls `gethostname`; coreutils'
//! `uname -n`, Python's `socket.gethostname()`/`platform.node()`, Node's `os.hostname()` and
//! the JVM's `InetAddress.getLocalHost()` all land on these entry points.

/// The NIS domain name a sealed process sees.
pub const DOMAINNAME: &[u8] = b"(none)";

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

#[cfg(not(test))]
mod hooks {
    use seal_abi::{flags, Fid, NO_DETAIL};

    use super::{copy_name, set_field, DOMAINNAME};
    use crate::{caller, census, config, real};

    fn set_errno(e: i32) {
        // SAFETY: errno is thread-local.
        unsafe { *libc::__errno_location() = e };
    }

    /// # Safety
    /// As `gethostname(2)`: `name` valid for `len` bytes.
    #[no_mangle]
    pub unsafe extern "C" fn gethostname(
        name: *mut libc::c_char,
        len: libc::size_t,
    ) -> libc::c_int {
        let ra = caller!();
        census::count(Fid::Gethostname, NO_DETAIL, ra);
        if config::sealed(flags::HOST) && !name.is_null() {
            // SAFETY: the caller guarantees `len` writable bytes.
            let out = unsafe { core::slice::from_raw_parts_mut(name as *mut u8, len) };
            return match copy_name(config::HOSTNAME.get(), out) {
                Ok(()) => 0,
                Err(e) => {
                    set_errno(e);
                    -1
                }
            };
        }
        let real = real!(gethostname: fn(*mut libc::c_char, libc::size_t) -> libc::c_int);
        // SAFETY: forwarded.
        unsafe { real(name, len) }
    }

    /// # Safety
    /// As `uname(2)`.
    #[no_mangle]
    pub unsafe extern "C" fn uname(buf: *mut libc::utsname) -> libc::c_int {
        let ra = caller!();
        census::count(Fid::Uname, NO_DETAIL, ra);
        let real = real!(uname: fn(*mut libc::utsname) -> libc::c_int);
        // SAFETY: forwarded.
        let r = unsafe { real(buf) };
        if r == 0 && !buf.is_null() && config::sealed(flags::HOST) {
            // SAFETY: the real uname filled it, so it is a valid utsname.
            let u = unsafe { &mut *buf };
            set_field(&mut u.nodename, config::HOSTNAME.get());
            set_field(&mut u.domainname, DOMAINNAME);
        }
        r
    }

    /// # Safety
    /// As `getdomainname(2)`.
    #[no_mangle]
    pub unsafe extern "C" fn getdomainname(
        name: *mut libc::c_char,
        len: libc::size_t,
    ) -> libc::c_int {
        let ra = caller!();
        census::count(Fid::Getdomainname, NO_DETAIL, ra);
        if config::sealed(flags::HOST) && !name.is_null() {
            // glibc copies min(len, strlen + 1) bytes and never fails for a short buffer.
            // SAFETY: the caller guarantees `len` writable bytes.
            let out = unsafe { core::slice::from_raw_parts_mut(name as *mut u8, len) };
            let _ = copy_name(DOMAINNAME, out);
            return 0;
        }
        let real = real!(getdomainname: fn(*mut libc::c_char, libc::size_t) -> libc::c_int);
        // SAFETY: forwarded.
        unsafe { real(name, len) }
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
}
