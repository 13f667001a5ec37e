//! The processors a child the launcher forks starts on ([`Cpus`]).

/// The processors the launcher may run on, and the one it runs on.
pub struct Cpus {
    set: libc::cpu_set_t,
    now: i32,
}

impl Cpus {
    pub fn of_launcher() -> Cpus {
        // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity fills it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) != 0 {
                libc::CPU_ZERO(&mut set);
            }
            Cpus {
                set,
                now: libc::sched_getcpu(),
            }
        }
    }

    /// Moves child `pid`, just forked, to another processor the launcher may use. A new
    /// process is queued on its parent's processor, and where the kernel packs tasks onto
    /// few processors (some VMs) it waited there until the launcher blocked, ~0.2 ms, then
    /// set itself up on the root's path instead of beside the launcher's own work. The child
    /// takes back the launcher's whole set ([`Self::restore`]) once it is past that.
    pub fn start_elsewhere(&self, pid: libc::pid_t) {
        let other = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: CPU_ISSET reads the set.
            .find(|&c| c as i32 != self.now && unsafe { libc::CPU_ISSET(c, &self.set) });
        if let (Some(c), true) = (other, self.now >= 0) {
            // SAFETY: a set of one processor, for our own child.
            unsafe {
                let mut one: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(c, &mut one);
                libc::sched_setaffinity(pid, std::mem::size_of_val(&one), &one);
            }
        }
    }

    /// In the child: the launcher's set of processors again.
    pub fn restore(&self) {
        // SAFETY: a set we own, for this process.
        unsafe {
            if libc::CPU_COUNT(&self.set) > 0 {
                libc::sched_setaffinity(0, std::mem::size_of_val(&self.set), &self.set);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn affinity(pid: libc::pid_t) -> Vec<usize> {
        // SAFETY: a zeroed set, filled by the kernel; CPU_ISSET reads it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(
                libc::sched_getaffinity(pid, std::mem::size_of_val(&set), &mut set),
                0
            );
            (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| libc::CPU_ISSET(c, &set))
                .collect()
        }
    }

    /// A child started elsewhere runs on one other processor of the launcher's set, and takes
    /// the whole set back when it restores it (with one processor, nothing moves).
    #[test]
    fn a_forked_child_starts_on_another_processor_and_takes_the_set_back() {
        let cpus = Cpus::of_launcher();
        let all = affinity(0);
        // SAFETY: the child only sleeps, restores its set when told (a byte) and exits.
        let mut fds = [0; 2];
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let mut b = 0u8;
            // SAFETY: reads one byte, then system calls only.
            unsafe {
                libc::read(fds[0], (&mut b as *mut u8).cast(), 1);
                cpus.restore();
                libc::read(fds[0], (&mut b as *mut u8).cast(), 1);
                libc::_exit(0);
            }
        }
        cpus.start_elsewhere(pid);
        let moved = affinity(pid);
        if all.len() > 1 && cpus.now >= 0 {
            assert_eq!(moved.len(), 1, "{moved:?}");
            assert_ne!(moved[0] as i32, cpus.now);
            assert!(all.contains(&moved[0]));
        } else {
            assert_eq!(moved, all);
        }
        // SAFETY: our pipe and child.
        unsafe {
            libc::write(fds[1], b"x".as_ptr().cast(), 1);
            let mut back = affinity(pid);
            for _ in 0..1000 {
                if back == all {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
                back = affinity(pid);
            }
            assert_eq!(back, all);
            libc::write(fds[1], b"x".as_ptr().cast(), 1);
            let mut st = 0;
            assert_eq!(libc::waitpid(pid, &mut st, 0), pid);
        }
    }
}
