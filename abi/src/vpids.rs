//! Virtual pid numbers: the run's range, the fixed numbers (the root, the launcher, the
//! session and group the launcher runs in) and the candidates a new process claims.

use crate::mix64;

/// Highest virtual pid + 1. Virtual pids live in `VPID_MIN..VPID_LIMIT`, below the kernel's
/// smallest default `pid_max`, so programs that assume 15-bit pids keep working.
pub const VPID_LIMIT: usize = 32768;
/// The root process of a sealed run.
pub const ROOT_VPID: i32 = 1000;
/// What a sealed root sees as its parent (the launcher).
pub const LAUNCHER_VPID: i32 = 999;
pub const VPID_MIN: i32 = 1000;
/// What the run is shown for the session the launcher runs in, when a process outside the run
/// leads it (a login shell, a terminal emulator, `script`, a CI runner's shell): that leader's
/// real pid would change from launch to launch and machine to machine.
pub const SESSION_VPID: i32 = 998;
/// The same for the launcher's process group, when an outside process leads it too and it is
/// not the session (a non-interactive shell runs `seal` in its own group).
pub const GROUP_VPID: i32 = 997;
/// The lowest number the run table holds: the launcher's group, session and the launcher.
pub const TABLE_VPID_MIN: i32 = GROUP_VPID;

/// The entries a run's root registers for the session and group its launcher runs in:
/// `(SESSION_VPID, sid)` and `(GROUP_VPID, pgid)`, each with 0 for "none" when the launcher
/// leads it itself (it shows as 999), when the kernel gave no pid (0: a leader in another pid
/// namespace; an error) or when it is pid 1 (the same in every container of its kind, and
/// every orphan's parent).
pub fn outside_leaders(launcher: i32, sid: i32, pgid: i32) -> [(i32, i32); 2] {
    let outside = |p: i32| p > 1 && p != launcher;
    let sid = if outside(sid) { sid } else { 0 };
    let pgid = if outside(pgid) && pgid != sid {
        pgid
    } else {
        0
    };
    [(SESSION_VPID, sid), (GROUP_VPID, pgid)]
}

/// Candidate virtual pid number `attempt` for a process or thread with this lineage key.
pub const fn vpid_candidate(lineage: u64, attempt: u64) -> i32 {
    let span = (VPID_LIMIT as u64) - (VPID_MIN as u64) - 1;
    (VPID_MIN as u64 + 1 + mix64(lineage ^ mix64(attempt + 0x51)) % span) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_leaders_name_only_other_processes() {
        let (s, g) = (SESSION_VPID, GROUP_VPID);
        // A login shell leads the session, a non-interactive shell the group.
        assert_eq!(outside_leaders(50, 7, 40), [(s, 7), (g, 40)]);
        // An interactive shell's job: the launcher leads its group.
        assert_eq!(outside_leaders(50, 7, 50), [(s, 7), (g, 0)]);
        // `script -c seal`: one outside process leads both.
        assert_eq!(outside_leaders(50, 7, 7), [(s, 7), (g, 0)]);
        // setsid seal; a leader in another namespace (0); pid 1.
        assert_eq!(outside_leaders(50, 50, 50), [(s, 0), (g, 0)]);
        assert_eq!(outside_leaders(50, 0, 1), [(s, 0), (g, 0)]);
        assert!(TABLE_VPID_MIN == g && g < s && s < LAUNCHER_VPID);
    }
}
