//! End-to-end stress tests: many threads, processes and signals at once, each bounded by a
//! harness timeout and checked exactly (census counts, identical output run after run). The
//! whole module is sized to finish in about a minute on two loaded cores.
use std::time::Duration;

use crate::util::*;

#[test]
fn signal_handlers_and_the_thread_they_interrupt_never_share_a_clock_or_random_value() {
    let exe = build_c("signal_storm", &[]);
    for _ in 0..2 {
        let out = run_timeout(seal(["--", exe.to_str().unwrap()]), Duration::from_secs(60));
        out.ok();
        assert_eq!(
            out.stdout,
            "clock_dups=0 clock_backwards=0 random_dups=0\n",
            "{}",
            out.show()
        );
    }
}
