//! `linux_dirent64` records, as `getdents64` writes them and glibc's `readdir` returns them
//! (the pure part of a listing): parsing, writing, and rewriting a buffer of them with
//! numeric names renamed or left out.

use crate::core::sys;

/// Offset of `d_name` in a `linux_dirent64` record (and in glibc's `struct dirent64`).
pub const NAME_AT: usize = 19;
/// `sizeof(struct dirent64)` in glibc: a 256-byte name after the header, padded to 8.
pub const DIRENT_SIZE: usize = 280;

/// A pid as procfs spells it (no sign, no leading zero, fits an `i32`).
pub fn numeric(name: &[u8]) -> Option<i32> {
    if name.is_empty() || name.len() > 10 || !(b'1'..=b'9').contains(&name[0]) {
        return None;
    }
    if !name.iter().all(u8::is_ascii_digit) {
        return None;
    }
    sys::parse_i64(name).and_then(|v| i32::try_from(v).ok())
}

/// The record length of a name of `len` bytes: header, name, NUL, padded to 8 (as the kernel).
pub const fn reclen_for(len: usize) -> usize {
    (NAME_AT + len + 1 + 7) & !7
}

/// One `linux_dirent64` record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub ino: u64,
    pub off: i64,
    pub reclen: usize,
    pub dtype: u8,
    pub name: &'a [u8],
}

/// The record at `at` of `buf`; `None` at the end or on a malformed record.
pub fn record(buf: &[u8], at: usize) -> Option<Record<'_>> {
    let h = buf.get(at..at.checked_add(NAME_AT)?)?;
    let reclen = u16::from_ne_bytes([h[16], h[17]]) as usize;
    if reclen <= NAME_AT || at + reclen > buf.len() {
        return None;
    }
    let raw = &buf[at + NAME_AT..at + reclen];
    let len = raw.iter().position(|&c| c == 0)?;
    Some(Record {
        ino: u64::from_ne_bytes(h[0..8].try_into().unwrap_or([0; 8])),
        off: i64::from_ne_bytes(h[8..16].try_into().unwrap_or([0; 8])),
        reclen,
        dtype: h[18],
        name: &raw[..len],
    })
}

/// Writes a record named `name` at the start of `dst` (zero padded); its length, or `None`
/// when it does not fit.
pub fn write_record(dst: &mut [u8], ino: u64, off: i64, dtype: u8, name: &[u8]) -> Option<usize> {
    let n = reclen_for(name.len());
    let d = dst.get_mut(..n)?;
    d[0..8].copy_from_slice(&ino.to_ne_bytes());
    d[8..16].copy_from_slice(&off.to_ne_bytes());
    d[16..18].copy_from_slice(&(n as u16).to_ne_bytes());
    d[18] = dtype;
    d[NAME_AT..NAME_AT + name.len()].copy_from_slice(name);
    d[NAME_AT + name.len()..].fill(0);
    Some(n)
}

/// Does any record of `buf` have a numeric name (the only ones a listing changes)?
pub fn has_numeric(buf: &[u8]) -> bool {
    let mut at = 0;
    while let Some(r) = record(buf, at) {
        if numeric(r.name).is_some() {
            return true;
        }
        at += r.reclen;
    }
    false
}

/// What [`rewrite`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rewritten {
    /// Bytes of records written.
    pub written: usize,
    /// A record did not fit: the rest of the source was not taken.
    pub full: bool,
    /// `d_off` of the last source record taken (written or hidden): where to resume.
    pub resume: Option<i64>,
}

/// Copies the records of `src` into `dst`, numeric names through `show` (the name to show,
/// or `None` to hide the record); stops before the first record that does not fit.
pub fn rewrite(src: &[u8], dst: &mut [u8], show: &mut dyn FnMut(i32) -> Option<i32>) -> Rewritten {
    let (mut at, mut written) = (0, 0);
    let mut out = Rewritten {
        written: 0,
        full: false,
        resume: None,
    };
    while let Some(r) = record(src, at) {
        let mut digits = sys::StackBuf::<16>::new();
        let name = match numeric(r.name).map(|p| (p, show(p))) {
            None => r.name,
            Some((_, None)) => {
                at += r.reclen;
                out.resume = Some(r.off);
                continue;
            }
            Some((p, Some(v))) if v == p => r.name,
            Some((_, Some(v))) => digits.push_i64(v as i64).as_bytes(),
        };
        let Some(n) = write_record(&mut dst[written..], r.ino, r.off, r.dtype, name) else {
            out.full = true;
            break;
        };
        written += n;
        at += r.reclen;
        out.resume = Some(r.off);
    }
    out.written = written;
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A buffer of records `(ino, off, type, name)`, as the kernel writes them.
    pub(crate) fn records<S: AsRef<str>>(list: &[(u64, i64, u8, S)]) -> Vec<u8> {
        let mut v = vec![0u8; 64 * 1024];
        let mut at = 0;
        for (ino, off, t, name) in list {
            at += write_record(&mut v[at..], *ino, *off, *t, name.as_ref().as_bytes()).unwrap();
        }
        v.truncate(at);
        v
    }

    pub(crate) fn names(buf: &[u8]) -> Vec<(String, i64, u8, u64)> {
        let mut out = vec![];
        let mut at = 0;
        while let Some(r) = record(buf, at) {
            assert_eq!(r.reclen % 8, 0);
            assert_eq!(r.reclen, reclen_for(r.name.len()));
            out.push((
                String::from_utf8(r.name.to_vec()).unwrap(),
                r.off,
                r.dtype,
                r.ino,
            ));
            at += r.reclen;
        }
        assert_eq!(at, buf.len(), "trailing bytes");
        out
    }

    #[test]
    fn numeric_names_are_pids_as_procfs_spells_them() {
        assert_eq!(numeric(b"1"), Some(1));
        assert_eq!(numeric(b"4194304"), Some(4_194_304));
        assert_eq!(numeric(b"2147483647"), Some(i32::MAX));
        crate::rejects! { numeric =>
            "" "0" "01" "self" "12a" "-1" "2147483648" "12345678901" "."
        }
    }

    #[test]
    fn records_are_sized_as_the_kernel_sizes_them() {
        assert_eq!(reclen_for(1), 24);
        assert_eq!(reclen_for(4), 24);
        assert_eq!(reclen_for(5), 32);
        assert_eq!(reclen_for(255), 280);
        assert_eq!(reclen_for(255), DIRENT_SIZE);
        let mut small = [0u8; 23];
        assert_eq!(write_record(&mut small, 1, 2, 4, b"1"), None);
        let b = records(&[(7, 9, libc::DT_DIR, "12345")]);
        assert_eq!(
            record(&b, 0),
            Some(Record {
                ino: 7,
                off: 9,
                reclen: 32,
                dtype: libc::DT_DIR,
                name: b"12345"
            })
        );
        // Malformed: a record running past the buffer, a zero length, no NUL.
        assert_eq!(record(&b[..31], 0), None);
        let mut z = b.clone();
        z[16] = 0;
        assert_eq!(record(&z, 0), None);
        let mut nonul = b.clone();
        nonul[NAME_AT..32].fill(b'7');
        assert_eq!(record(&nonul, 0), None);
    }

    #[test]
    fn non_numeric_records_are_copied_and_hidden_ones_leave_no_gap() {
        let src = records(&[
            (1, 1, 4, "."),
            (5, 7, 4, "42"),
            (6, 9, 10, "self"),
            (8, 11, 4, "43"),
        ]);
        let mut dst = vec![0u8; 4096];
        let r = rewrite(&src, &mut dst, &mut |p| (p == 43).then_some(1234));
        assert_eq!(
            r,
            Rewritten {
                written: 72,
                full: false,
                resume: Some(11)
            }
        );
        let got: Vec<String> = names(&dst[..r.written]).into_iter().map(|n| n.0).collect();
        assert_eq!(got, [".", "self", "1234"]);
    }
}
