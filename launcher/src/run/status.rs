//! How a sealed command ended or why it could not start, as the status seal exits with: the
//! command's own code, 128+N for a signal, 126/127 as a shell reports a command it cannot run,
//! 125 when seal itself failed.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

/// Exit status when seal itself fails.
pub const EXIT_SEAL_FAILED: u8 = 125;
pub const EXIT_NOT_EXECUTABLE: u8 = 126;
pub const EXIT_NOT_FOUND: u8 = 127;

/// 128+N for a signal, the code otherwise.
pub fn status_code(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        _ => EXIT_SEAL_FAILED as i32,
    }
}

/// Why a command could not be started, as a shell would report it.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("{0}: command not found")]
    NotFound(String),
    #[error("{0}: permission denied (not executable)")]
    NotExecutable(String),
    /// A script whose `#!` interpreter cannot be run (exit 127 when it is missing, as bash
    /// does, else 126).
    #[error("{0}: bad interpreter {1}: {}", .2.strerror())]
    BadInterpreter(String, String, Errno),
    #[error("{0}: cannot run: {1}")]
    Other(String, std::io::Error),
}

impl SpawnError {
    pub fn exit_code(&self) -> u8 {
        match self {
            SpawnError::NotFound(_) => EXIT_NOT_FOUND,
            SpawnError::BadInterpreter(_, _, Errno::NotFound) => EXIT_NOT_FOUND,
            SpawnError::NotExecutable(_)
            | SpawnError::BadInterpreter(..)
            | SpawnError::Other(..) => EXIT_NOT_EXECUTABLE,
        }
    }

    /// `e` from starting `program` in `cwd` (None: seal's own directory).
    pub(super) fn from_io(program: &OsStr, cwd: Option<&Path>, e: std::io::Error) -> SpawnError {
        let name = program.to_string_lossy().into_owned();
        let not_found = e.kind() == std::io::ErrorKind::NotFound;
        if not_found || e.kind() == std::io::ErrorKind::PermissionDenied {
            // execve reports a script's missing or unusable interpreter as the script's own
            // error: name the interpreter instead.
            if let Some(interp) = shebang_interpreter(program, cwd) {
                let e = if not_found {
                    Errno::NotFound
                } else {
                    Errno::Denied
                };
                return SpawnError::BadInterpreter(name, interp, e);
            }
        }
        match e.kind() {
            std::io::ErrorKind::NotFound => SpawnError::NotFound(name),
            std::io::ErrorKind::PermissionDenied => SpawnError::NotExecutable(name),
            _ if e.raw_os_error() == Some(libc::ENOEXEC)
                || e.raw_os_error() == Some(libc::EISDIR) =>
            {
                SpawnError::NotExecutable(name)
            }
            _ => SpawnError::Other(name, e),
        }
    }
}

/// Why an interpreter cannot be run, in the words of strerror (without Rust's "(os error N)").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Errno {
    NotFound,
    Denied,
}

impl Errno {
    fn strerror(&self) -> &'static str {
        match self {
            Errno::NotFound => "No such file or directory",
            Errno::Denied => "Permission denied",
        }
    }
}

/// The interpreter a script names on its `#!` line, when `program` is an executable file that
/// has one and that interpreter cannot be executed.
fn shebang_interpreter(program: &OsStr, cwd: Option<&Path>) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let path = if program.as_bytes().contains(&b'/') {
        match cwd {
            Some(d) => d.join(program),
            None => PathBuf::from(program),
        }
    } else {
        super::exec_check::resolve(program)?
    };
    let meta = std::fs::metadata(&path).ok()?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return None;
    }
    let mut head = [0u8; 256];
    let n = std::fs::File::open(&path).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let interp = String::from_utf8_lossy(line);
    let interp = interp.split_whitespace().next()?.to_string();
    let c = std::ffi::CString::new(interp.as_bytes()).ok()?;
    // SAFETY: access(2) on a NUL-terminated path.
    (unsafe { libc::access(c.as_ptr(), libc::X_OK) } != 0).then_some(interp)
}
