//! Writes over a stopped tracee's text: `PTRACE_POKEDATA`, as a debugger sets breakpoints (the
//! clock code over the vDSO, the batch's instructions, `runtime.cputicks`).

use super::remote::read;

/// Writes `data` at `addr` in stopped tracee `pid` with `PTRACE_POKEDATA` (which writes
/// read-only text, as a debugger's breakpoints do).
pub(super) fn poke(pid: i32, addr: u64, data: &[u8]) -> bool {
    for (i, chunk) in data.chunks(8).enumerate() {
        let at = addr + 8 * i as u64;
        let mut word = [0u8; 8];
        if chunk.len() < 8 && !read(pid, at, &mut word) {
            return false;
        }
        word[..chunk.len()].copy_from_slice(chunk);
        // SAFETY: POKEDATA on our stopped tracee.
        if unsafe { libc::ptrace(libc::PTRACE_POKEDATA, pid, at, u64::from_le_bytes(word)) } != 0 {
            return false;
        }
    }
    true
}
