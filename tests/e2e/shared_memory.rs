//! A process that shares the shim's memory with its parent (`clone(CLONE_VM)` without
//! `CLONE_THREAD`) changes nothing of its parent's sealed identity, and is reported.

use crate::util::{build_c, run_sealed};

#[test]
fn a_clone_vm_child_leaves_its_parents_pid_alone() {
    let bin = build_c("clonevm", &[]);
    let out = run_sealed(&[bin.to_str().unwrap()]);
    out.ok();
    assert_eq!(
        out.stdout,
        "parent before 1000\nchild saw a pid: yes\nparent after 1000\n",
        "{}",
        out.show()
    );
    out.stderr_has("clone() creating a process");
}
