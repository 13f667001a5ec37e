//! Byte offsets of the CPython structures the frame reader walks, per minor version.
//!
//! Generated from each version's own headers (`include/python3.N/internal`, built with
//! `Py_BUILD_CORE`) by a C program printing `offsetof` of every field used here; checked
//! against the running interpreter before use (`super::activate`). Within a minor version
//! CPython keeps these stable; a layout that does not check out means no Python frames.

/// "This version has no such field."
pub const NONE: usize = usize::MAX;

#[derive(Debug)]
pub struct Layout {
    pub minor: u32,
    /// `_PyRuntime.(gilstate.)autoTSSkey._key`: the TSS key holding each thread's state.
    pub tss_key: usize,
    /// `PyThreadState.frame` (≤ 3.10), `.cframe` (3.11, 3.12) or `.current_frame` (3.13).
    pub ts_frame: usize,
    /// `_PyCFrame.current_frame` (3.11, 3.12).
    pub cframe_current: usize,
    /// `f_back` / `previous`.
    pub fr_back: usize,
    /// `f_code` / `f_executable`.
    pub fr_code: usize,
    /// `f_lasti` (≤ 3.10, an int), `prev_instr` (3.11, 3.12) or `instr_ptr` (3.13).
    pub fr_instr: usize,
    /// `_PyInterpreterFrame.owner` (3.11+).
    pub fr_owner: usize,
    /// `co_name` (≤ 3.10) or `co_qualname` (3.11+).
    pub co_name: usize,
    /// `co_code_adaptive` (3.11+): the bytecode the instruction pointer points into.
    pub co_code: usize,
    pub co_filename: usize,
    pub co_firstlineno: usize,
    /// `co_lnotab` (≤ 3.9) or `co_linetable` (3.10+).
    pub co_lines: usize,
    /// `PyASCIIObject.state`, `.length`, `sizeof(PyASCIIObject)`, `sizeof(PyCompactUnicodeObject)`.
    pub str_state: usize,
    pub str_len: usize,
    pub str_ascii: usize,
    pub str_compact: usize,
    /// `PyVarObject.ob_size`, `PyBytesObject.ob_sval`.
    pub bytes_size: usize,
    pub bytes_data: usize,
}

impl Layout {
    /// A layout from one row of [`LAYOUTS`]: the fields after `minor` in declaration order,
    /// but for the four that every version so far has at the same offset.
    const fn row(minor: u32, f: [usize; 14]) -> Layout {
        Layout {
            minor,
            tss_key: f[0],
            ts_frame: f[1],
            cframe_current: f[2],
            fr_back: f[3],
            fr_code: f[4],
            fr_instr: f[5],
            fr_owner: f[6],
            co_name: f[7],
            co_code: f[8],
            co_filename: f[9],
            co_firstlineno: f[10],
            co_lines: f[11],
            str_state: 32,
            str_len: 16,
            str_ascii: f[12],
            str_compact: f[13],
            bytes_size: 16,
            bytes_data: 32,
        }
    }
}

/// `NONE`, short, so that a row of [`LAYOUTS`] fits on a line.
const NO: usize = NONE;

/// The layouts of CPython 3.8 to 3.13, one version a row, the columns `Layout`'s fields (in
/// every one of them `str_state` is 32, `str_len` 16, `bytes_size` 16, `bytes_data` 32).
#[rustfmt::skip]
pub static LAYOUTS: [Layout; 6] = [
    //               tss   ts  cfr back code  ins  own name code file  1st  lns  asc  cmp
    // 3.8.18
    Layout::row( 8, [1396,  24,  NO,  24,  32, 104,  NO, 112,  NO, 104,  40, 120,  48,  72]),
    // 3.9.18
    Layout::row( 9, [ 588,  24,  NO,  24,  32, 104,  NO, 112,  NO, 104,  40, 120,  48,  72]),
    // 3.10.13
    Layout::row(10, [ 588,  24,  NO,  24,  32,  96,  NO, 112,  NO, 104,  40, 120,  48,  72]),
    // 3.11.7
    Layout::row(11, [ 596,  56,   8,  48,  32,  56,  69, 128, 184, 112,  72, 136,  48,  72]),
    // 3.12.1
    Layout::row(12, [1548,  56,   0,   8,   0,  56,  70, 128, 192, 112,  68, 136,  40,  56]),
    // 3.13.0
    Layout::row(13, [2164,  72,  NO,   8,   0,  56,  70, 128, 200, 112,  68, 136,  40,  56]),
];
