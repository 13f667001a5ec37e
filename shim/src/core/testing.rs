//! Helpers for the shim's unit tests (compiled only for them).

/// Asserts that `$f` (a function of `&[u8]` returning an `Option`) gives `None` for each of
/// the string literals after `=>`, naming the one that does not. Written with braces, so a
/// list of inputs stays a few lines of data.
#[macro_export]
macro_rules! rejects {
    ($f:expr => $($input:literal)*) => {
        for p in [$($input.as_bytes()),*] {
            assert_eq!($f(p), None, "{}", String::from_utf8_lossy(p));
        }
    };
}
