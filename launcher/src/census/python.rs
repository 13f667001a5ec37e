//! Reading side of the census's Python frames (`seal_abi::py`): which Python line made each
//! sealed call of a CPython process, joined with the native caller of the same census slot.

use std::collections::BTreeMap;
use std::mem::offset_of;

use seal_abi::py::{split_py_slot_key, PyCensus, PySite, PY_SITES, PY_SLOTS, SITE_IMPORT};
use seal_abi::CensusFile;
use serde::{Deserialize, Serialize};

use super::bytes::{u32_at, u64_at};

/// A Python source position: file (the code object's `co_filename`), line, function
/// (`co_qualname` from 3.11, `co_name` before).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Frame {
    pub file: String,
    pub line: u32,
    pub function: String,
}

/// Python frames of one image: `version` (`PY_VERSION_HEX`) and counts per
/// (census slot, innermost frame, user frame, innermost frame is import machinery).
#[derive(Debug, Clone, Default)]
pub struct PyImage {
    pub version: u32,
    pub counts: Vec<PyCount>,
}

#[derive(Debug, Clone)]
pub struct PyCount {
    pub slot: usize,
    pub inner: Frame,
    pub user: Option<Frame>,
    pub import: bool,
    pub count: u64,
}

/// The Python frames of a census slot's bytes (`None`: no interpreter, or no frames).
pub fn read(b: &[u8]) -> Option<PyImage> {
    let base = offset_of!(CensusFile, py);
    if u32_at(b, base + offset_of!(PyCensus, status)) != seal_abi::py::STATUS_ON {
        return None;
    }
    let version = u32_at(b, base + offset_of!(PyCensus, version));
    let strings = base + offset_of!(PyCensus, strings);
    let text = |off: u32, len: u32| {
        let (o, l) = (off as usize, len as usize);
        let s = b.get(strings + o..strings + o + l).unwrap_or(&[]);
        String::from_utf8_lossy(s).into_owned()
    };
    let site_size = std::mem::size_of::<PySite>();
    let sites_at = base + offset_of!(PyCensus, sites);
    let site = |i: usize| -> Option<(Frame, u32)> {
        if i >= PY_SITES {
            return None;
        }
        let s = sites_at + i * site_size;
        if u32_at(b, s + offset_of!(PySite, ready)) != 1 {
            return None;
        }
        let f = |o| u32_at(b, s + o);
        Some((
            Frame {
                file: text(
                    f(offset_of!(PySite, file_off)),
                    f(offset_of!(PySite, file_len)),
                ),
                line: f(offset_of!(PySite, line)),
                function: text(
                    f(offset_of!(PySite, func_off)),
                    f(offset_of!(PySite, func_len)),
                ),
            },
            f(offset_of!(PySite, flags)),
        ))
    };
    let slots_at = base + offset_of!(PyCensus, slots);
    let mut merged: BTreeMap<(usize, Frame, Option<Frame>, bool), u64> = BTreeMap::new();
    for i in 0..PY_SLOTS {
        let key = u64_at(b, slots_at + i * 16);
        let count = u64_at(b, slots_at + i * 16 + 8);
        if key == 0 || count == 0 {
            continue;
        }
        let (slot, inner, user) = split_py_slot_key(key);
        let Some((inner, flags)) = site(inner) else {
            continue;
        };
        let user = user.and_then(site).map(|(f, _)| f);
        *merged
            .entry((slot, inner, user, flags & SITE_IMPORT != 0))
            .or_default() += count;
    }
    Some(PyImage {
        version,
        counts: merged
            .into_iter()
            .map(|((slot, inner, user, import), count)| PyCount {
                slot,
                inner,
                user,
                import,
                count,
            })
            .collect(),
    })
}

/// `3.11.7` from `0x030b07f0`.
pub fn version_text(v: u32) -> String {
    let (major, minor, micro) = (v >> 24, (v >> 16) & 0xff, (v >> 8) & 0xff);
    if micro == 0 && v & 0xff == 0 {
        format!("{major}.{minor}")
    } else {
        format!("{major}.{minor}.{micro}")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn versions_read_as_python_prints_them() {
        assert_eq!(super::version_text(0x030b07f0), "3.11.7");
        assert_eq!(super::version_text(0x030a0000), "3.10");
    }
}
