#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#if PY_VERSION_HEX >= 0x03090000
#include "internal/pycore_runtime.h"
#endif
#include "internal/pycore_pystate.h"
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#include "internal/pycore_code.h"
#else
#include "frameobject.h"
#endif
int main(void) {
  printf("    // %s\n", PY_VERSION);
  printf("    Layout {\n        minor: %d,\n", PY_MINOR_VERSION);
#if PY_VERSION_HEX >= 0x030C0000
  printf("        tss_key: %zu,\n", offsetof(_PyRuntimeState, autoTSSkey) + offsetof(Py_tss_t, _key));
#else
  printf("        tss_key: %zu,\n", offsetof(_PyRuntimeState, gilstate.autoTSSkey) + offsetof(Py_tss_t, _key));
#endif
#if PY_VERSION_HEX >= 0x030D0000
  printf("        ts_frame: %zu,\n        cframe_current: NONE,\n", offsetof(PyThreadState, current_frame));
#elif PY_VERSION_HEX >= 0x030B0000
  printf("        ts_frame: %zu,\n        cframe_current: %zu,\n", offsetof(PyThreadState, cframe), offsetof(_PyCFrame, current_frame));
#else
  printf("        ts_frame: %zu,\n        cframe_current: NONE,\n", offsetof(PyThreadState, frame));
#endif
#if PY_VERSION_HEX >= 0x030D0000
  printf("        fr_back: %zu,\n        fr_code: %zu,\n        fr_instr: %zu,\n        fr_owner: %zu,\n",
    offsetof(_PyInterpreterFrame, previous), offsetof(_PyInterpreterFrame, f_executable), offsetof(_PyInterpreterFrame, instr_ptr), offsetof(_PyInterpreterFrame, owner));
#elif PY_VERSION_HEX >= 0x030B0000
  printf("        fr_back: %zu,\n        fr_code: %zu,\n        fr_instr: %zu,\n        fr_owner: %zu,\n",
    offsetof(_PyInterpreterFrame, previous), offsetof(_PyInterpreterFrame, f_code), offsetof(_PyInterpreterFrame, prev_instr), offsetof(_PyInterpreterFrame, owner));
#else
  printf("        fr_back: %zu,\n        fr_code: %zu,\n        fr_instr: %zu,\n        fr_owner: NONE,\n",
    offsetof(PyFrameObject, f_back), offsetof(PyFrameObject, f_code), offsetof(PyFrameObject, f_lasti));
#endif
#if PY_VERSION_HEX >= 0x030B0000
  printf("        co_name: %zu,\n", offsetof(PyCodeObject, co_qualname));
  printf("        co_code: %zu,\n", offsetof(PyCodeObject, co_code_adaptive));
#else
  printf("        co_name: %zu,\n", offsetof(PyCodeObject, co_name));
  printf("        co_code: NONE,\n");
#endif
  printf("        co_filename: %zu,\n", offsetof(PyCodeObject, co_filename));
  printf("        co_firstlineno: %zu,\n", offsetof(PyCodeObject, co_firstlineno));
#if PY_VERSION_HEX >= 0x030A0000
  printf("        co_lines: %zu,\n", offsetof(PyCodeObject, co_linetable));
#else
  printf("        co_lines: %zu,\n", offsetof(PyCodeObject, co_lnotab));
#endif
  printf("        str_state: %zu,\n        str_len: %zu,\n        str_ascii: %zu,\n        str_compact: %zu,\n",
    offsetof(PyASCIIObject, state), offsetof(PyASCIIObject, length), sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject));
  printf("        bytes_size: %zu,\n        bytes_data: %zu,\n    },\n", offsetof(PyVarObject, ob_size), offsetof(PyBytesObject, ob_sval));
  return 0;
}
