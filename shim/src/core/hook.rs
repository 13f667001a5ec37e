//! `hook!`: one exported libc entry point from its signature, written once.
//!
//! ```ignore
//! hook! {
//!     /// # Safety
//!     /// As `sem_timedwait(3)`.
//!     fn sem_timedwait(sem: *mut sem_t, abstime: *const timespec) -> c_int;
//!     fid = SemTimedwait, detail = detail(CLOCK_REALTIME);
//!     // SAFETY: forwarded contract.
//!     |real| ret_of(unsafe {
//!         until(CLOCK_REALTIME, abstime, || sem_warpable(sem), |ts| err_of(real(sem, ts)))
//!     })
//! }
//! ```
//!
//! emits `#[no_mangle] pub unsafe extern "C" fn sem_timedwait(…) -> c_int` whose body counts
//! the call (`census::count(Fid::SemTimedwait, detail, caller)`, the caller read inside this
//! exported frame, see `caller!`), binds `real` to a closure calling the real libc function
//! (resolved through `real!` on its first call, so a path that never calls it never runs
//! `dlsym`), and then evaluates the body.
//!
//! * `fn a | b | c(…) -> r;` exports one function per name, each with its own `real`.
//! * The count line is one of `fid = F;` (no detail), `fid = F, detail = expr;` (`expr` may
//!   use the arguments), `caller = ra;` (binds the caller's return address to `ra` and counts
//!   nothing: for bodies that count conditionally or in a shared `*_impl(fid, ra)`), or
//!   `uncounted;`.
//! * The body is `|real| expr`, or `|| expr` when it does not call the real function.
//!   `real` is a safe closure over the real function: the macro holds its one SAFETY note (a
//!   body calls it with its own arguments, or values derived from them under the same
//!   contract); anything else unsafe in a body keeps its own `unsafe` block and note.
//!
//! The body is the exported function's own body (no inner function, no closure around it), so
//! anything it reads from the frame (`[rbp+16]`) is still the exported frame's.

pub use seal_abi::{Fid, NO_DETAIL};

#[macro_export]
macro_rules! hook {
    // The four count lines, normalised to a bracketed form.
    ($(#[$m:meta])* fn $($name:ident)|+ ($($args:tt)*) -> $r:ty;
     fid = $fid:ident, detail = $d:expr; $($body:tt)+) => {
        $crate::hook!(@names [$(#[$m])*] [$($name)+] ($($args)*) -> $r; [fid $fid ($d)] $($body)+);
    };
    ($(#[$m:meta])* fn $($name:ident)|+ ($($args:tt)*) -> $r:ty;
     fid = $fid:ident; $($body:tt)+) => {
        $crate::hook!(@names [$(#[$m])*] [$($name)+] ($($args)*) -> $r;
                      [fid $fid ($crate::core::hook::NO_DETAIL)] $($body)+);
    };
    ($(#[$m:meta])* fn $($name:ident)|+ ($($args:tt)*) -> $r:ty;
     caller = $ra:ident; $($body:tt)+) => {
        $crate::hook!(@names [$(#[$m])*] [$($name)+] ($($args)*) -> $r; [caller $ra] $($body)+);
    };
    ($(#[$m:meta])* fn $($name:ident)|+ ($($args:tt)*) -> $r:ty;
     uncounted; $($body:tt)+) => {
        $crate::hook!(@names [$(#[$m])*] [$($name)+] ($($args)*) -> $r; [uncounted] $($body)+);
    };

    // One exported function per name.
    (@names [$($attrs:tt)*] [] $($rest:tt)*) => {};
    (@names [$($attrs:tt)*] [$first:ident $($more:ident)*] $args:tt -> $r:ty;
     $count:tt $($body:tt)+) => {
        $crate::hook!(@one [$($attrs)*] $first $args -> $r; $count $($body)+);
        $crate::hook!(@names [$($attrs)*] [$($more)*] $args -> $r; $count $($body)+);
    };

    (@one [$($attrs:tt)*] $name:ident ($($arg:ident : $t:ty),* $(,)?) -> $r:ty;
     $count:tt $($body:tt)+) => {
        $($attrs)*
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $t),*) -> $r {
            $crate::hook!(@count $count);
            $crate::hook!(@body $name ($($arg: $t),*) -> $r; $($body)+)
        }
    };

    // The caller is read here, in the exported function's frame (`caller!` is a macro).
    (@count [fid $fid:ident ($d:expr)]) => {
        $crate::core::census::count($crate::core::hook::Fid::$fid, $d, $crate::caller!())
    };
    (@count [caller $ra:ident]) => {
        let $ra: u64 = $crate::caller!();
    };
    (@count [uncounted]) => {};

    (@body $name:ident ($($arg:ident : $t:ty),*) -> $r:ty; |$real:ident| $body:expr) => {{
        let $real = |$($arg: $t),*| -> $r {
            let f = $crate::real!($name: fn($($t),*) -> $r);
            // SAFETY: `f` is the libc function of this signature; a hook body calls `real` with
            // its own arguments, or with values it derived from them that meet the same
            // contract (the `# Safety` of the hook).
            unsafe { f($($arg),*) }
        };
        $body
    }};
    (@body $name:ident ($($arg:ident : $t:ty),*) -> $r:ty; || $body:expr) => {{
        $body
    }};
}
