//! The trainer thread's scheduling priority: the one place the manager calls the
//! operating system directly.
//!
//! Why: on a machine with few cores, request handling (uploads refused with 503 while
//! the learner catches up, dashboards, metrics) competes with the trainer thread for
//! CPU, and the learner is what the whole fleet waits on. Raising the trainer thread's
//! priority (a lower nice value) lets the kernel's scheduler give it its core first;
//! `docs/benchmarks.md` measures the difference ("Train steps/s while uploads are
//! refused"). Raising a priority needs root or `CAP_SYS_NICE`; without them the
//! thread runs at the default priority and the manager says so once.
//!
//! # Safety
//!
//! One `unsafe` block, the calls `libc::gettid()` and `libc::setpriority(PRIO_PROCESS,
//! tid, nice)`. What they need: nothing of our memory (they take and return plain
//! integers, no pointers), so no argument can break Rust's rules; a value the kernel
//! refuses is an error return (`EACCES`, `EINVAL`), read from `errno` and handed back.
//! What we rely on for the effect, not for soundness: on Linux `PRIO_PROCESS` with a
//! thread id applies to that thread alone (nice values are per thread there), which
//! the test below checks.
#![allow(unsafe_code)]

/// Set the calling thread's nice value (-20 highest .. 19 lowest). `Err` says why not.
#[cfg(target_os = "linux")]
pub fn set_current_thread_nice(nice: i32) -> std::io::Result<()> {
    // SAFETY: gettid and setpriority take and return plain integers and touch no
    // memory of ours; on Linux PRIO_PROCESS with a thread id applies to that thread
    // alone (nice values are per thread there).
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, nice) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
pub fn set_current_thread_nice(_nice: i32) -> std::io::Result<()> {
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "per-thread priorities are set on Linux only"))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn nice_of_this_thread() -> i32 {
        // /proc/thread-self/stat: field 19 is the nice value.
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        after_name.split(' ').nth(16).unwrap().parse().unwrap()
    }

    #[test]
    fn lowering_a_thread_s_priority_applies_to_that_thread_only() {
        // Lowering is always allowed, so this runs as any user.
        let main_before = nice_of_this_thread();
        let in_thread = std::thread::spawn(|| {
            set_current_thread_nice(7).unwrap();
            nice_of_this_thread()
        })
        .join()
        .unwrap();
        assert_eq!(in_thread, 7);
        assert_eq!(nice_of_this_thread(), main_before, "other threads keep theirs");
    }
}
