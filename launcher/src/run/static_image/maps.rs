//! A process's mappings, from `/proc/PID/maps`: its program's code, its load bias, its vDSO.

/// One line of `/proc/PID/maps`.
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    exec: bool,
    offset: u64,
    path: String,
}

/// A process's mappings.
pub struct Maps(pub Vec<Mapping>);

impl Maps {
    /// `/proc/PID/maps`, parsed (empty when it cannot be read).
    pub fn read(pid: i32) -> Maps {
        let text = super::remote::read_proc_text(&format!("/proc/{pid}/maps")).unwrap_or_default();
        Maps(
            text.lines()
                .filter_map(|l| {
                    let mut f = l.split_whitespace();
                    let (range, perms, offset) = (f.next()?, f.next()?, f.next()?);
                    let path = f.nth(2).unwrap_or("");
                    let (a, b) = range.split_once('-')?;
                    Some(Mapping {
                        start: u64::from_str_radix(a, 16).ok()?,
                        end: u64::from_str_radix(b, 16).ok()?,
                        exec: perms.contains('x'),
                        offset: u64::from_str_radix(offset, 16).ok()?,
                        path: path.to_owned(),
                    })
                })
                .collect(),
        )
    }

    fn of_exe<'a>(&'a self, exe: Option<&'a std::path::Path>) -> impl Iterator<Item = &'a Mapping> {
        self.0
            .iter()
            .filter(move |m| exe.is_some_and(|e| e.as_os_str() == m.path.as_str()))
    }

    /// The executable mappings of the program file `exe` (its own code).
    pub fn text(&self, exe: Option<&std::path::Path>) -> Vec<(u64, u64)> {
        self.of_exe(exe)
            .filter(|m| m.exec)
            .map(|m| (m.start, m.end))
            .collect()
    }

    /// A position-independent program's load bias: where its first page was mapped.
    pub fn bias(&self, exe: Option<&std::path::Path>, text: &[(u64, u64)]) -> u64 {
        self.of_exe(exe)
            .find(|m| m.offset == 0)
            .map(|m| m.start)
            .unwrap_or_else(|| text.iter().map(|r| r.0).min().unwrap_or(0))
    }

    /// The `[vdso]` mapping.
    pub fn vdso(&self) -> Option<(u64, u64)> {
        self.0
            .iter()
            .find(|m| m.path == "[vdso]")
            .map(|m| (m.start, m.end))
    }
}
