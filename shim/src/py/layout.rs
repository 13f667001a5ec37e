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

/// The layouts of CPython 3.8 to 3.13.
pub static LAYOUTS: [Layout; 6] = [
    // 3.8.18
    Layout {
        minor: 8,
        tss_key: 1396,
        ts_frame: 24,
        cframe_current: NONE,
        fr_back: 24,
        fr_code: 32,
        fr_instr: 104,
        fr_owner: NONE,
        co_name: 112,
        co_code: NONE,
        co_filename: 104,
        co_firstlineno: 40,
        co_lines: 120,
        str_state: 32,
        str_len: 16,
        str_ascii: 48,
        str_compact: 72,
        bytes_size: 16,
        bytes_data: 32,
    },
    // 3.9.18
    Layout {
        minor: 9,
        tss_key: 588,
        ts_frame: 24,
        cframe_current: NONE,
        fr_back: 24,
        fr_code: 32,
        fr_instr: 104,
        fr_owner: NONE,
        co_name: 112,
        co_code: NONE,
        co_filename: 104,
        co_firstlineno: 40,
        co_lines: 120,
        str_state: 32,
        str_len: 16,
        str_ascii: 48,
        str_compact: 72,
        bytes_size: 16,
        bytes_data: 32,
    },
    // 3.10.13
    Layout {
        minor: 10,
        tss_key: 588,
        ts_frame: 24,
        cframe_current: NONE,
        fr_back: 24,
        fr_code: 32,
        fr_instr: 96,
        fr_owner: NONE,
        co_name: 112,
        co_code: NONE,
        co_filename: 104,
        co_firstlineno: 40,
        co_lines: 120,
        str_state: 32,
        str_len: 16,
        str_ascii: 48,
        str_compact: 72,
        bytes_size: 16,
        bytes_data: 32,
    },
    // 3.11.7
    Layout {
        minor: 11,
        tss_key: 596,
        ts_frame: 56,
        cframe_current: 8,
        fr_back: 48,
        fr_code: 32,
        fr_instr: 56,
        fr_owner: 69,
        co_name: 128,
        co_code: 184,
        co_filename: 112,
        co_firstlineno: 72,
        co_lines: 136,
        str_state: 32,
        str_len: 16,
        str_ascii: 48,
        str_compact: 72,
        bytes_size: 16,
        bytes_data: 32,
    },
    // 3.12.1
    Layout {
        minor: 12,
        tss_key: 1548,
        ts_frame: 56,
        cframe_current: 0,
        fr_back: 8,
        fr_code: 0,
        fr_instr: 56,
        fr_owner: 70,
        co_name: 128,
        co_code: 192,
        co_filename: 112,
        co_firstlineno: 68,
        co_lines: 136,
        str_state: 32,
        str_len: 16,
        str_ascii: 40,
        str_compact: 56,
        bytes_size: 16,
        bytes_data: 32,
    },
    // 3.13.0
    Layout {
        minor: 13,
        tss_key: 2164,
        ts_frame: 72,
        cframe_current: NONE,
        fr_back: 8,
        fr_code: 0,
        fr_instr: 56,
        fr_owner: 70,
        co_name: 128,
        co_code: 200,
        co_filename: 112,
        co_firstlineno: 68,
        co_lines: 136,
        str_state: 32,
        str_len: 16,
        str_ascii: 40,
        str_compact: 56,
        bytes_size: 16,
        bytes_data: 32,
    },
];
