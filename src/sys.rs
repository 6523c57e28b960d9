//! The one module with `unsafe` code: signals to a child's process group, and the malloc
//! arena limit set once at start-up.
//!
//! Every stdio upstream server starts in its own process group (`Command::process_group(0)`,
//! safe std), so its group id is its pid and the group holds its descendants too (such as the
//! `node` process behind `npx`). Stopping a server signals the whole group, so no grandchild
//! survives.
//!
//! Why the `unsafe` blocks are sound: `killpg(2)` takes two integers and touches no memory of
//! ours; the only hazards are semantic, and both are guarded here: a group id of 0 or 1 would
//! signal our own group or every process we may signal, so such ids are refused before the
//! call. A stale group id (every member gone) yields `ESRCH`, which is reported as "no such
//! group", never as an error.
//!
//! Why the arena limit: glibc gives threads their own malloc arenas, and a long session whose
//! records are allocated and freed by several request threads then keeps growing in RSS past
//! the retention window (fragmentation across arenas: about 15 bytes per call measured over a
//! million calls), while two arenas keep it flat. `mallopt(3)` takes two integers and is
//! called before any thread starts.
#![allow(unsafe_code)]

use std::io;

/// Limits glibc's malloc to two arenas (see the module documentation). Does nothing on other
/// C libraries.
pub fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt takes two integers and touches no memory of ours; it is called before
        // any other thread exists.
        let ok = unsafe { libc::mallopt(libc::M_ARENA_MAX, 2) };
        if ok != 1 {
            log::debug!("mallopt(M_ARENA_MAX, 2) was refused");
        }
    }
}

/// A signal this module sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// Asks the processes to exit.
    Term,
    /// Ends them.
    Kill,
    /// Sends nothing: tells whether the group still has members.
    Probe,
}

/// Signals every process in group `pgid`. `Ok(false)` when the group has no members left.
pub fn signal_group(pgid: u32, signal: Signal) -> io::Result<bool> {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "process group id out of range",
        ));
    };
    if pgid <= 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal process group {pgid}"),
        ));
    }
    let sig = match signal {
        Signal::Term => libc::SIGTERM,
        Signal::Kill => libc::SIGKILL,
        Signal::Probe => 0,
    };
    // SAFETY: see the module documentation; `pgid` > 1 and `sig` is a valid signal number.
    let rc = unsafe { libc::killpg(pgid, sig) };
    if rc == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ESRCH) => Ok(false),
        // A group whose members all became zombies can answer EPERM on some systems.
        Some(libc::EPERM) if signal == Signal::Probe => Ok(true),
        _ => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::Command;
    use std::time::{Duration, Instant};

    #[test]
    fn refuses_our_own_and_the_global_group() {
        assert!(signal_group(0, Signal::Probe).is_err());
        assert!(signal_group(1, Signal::Probe).is_err());
    }

    #[test]
    fn terminates_a_whole_group_and_then_reports_it_gone() {
        // A shell in its own group that starts a grandchild in the same group.
        let mut child = Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = child.id();
        assert!(signal_group(pgid, Signal::Probe).unwrap());
        assert!(signal_group(pgid, Signal::Term).unwrap());
        child.wait().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while signal_group(pgid, Signal::Probe).unwrap() {
            assert!(
                Instant::now() < deadline,
                "the grandchild survived SIGTERM to its group"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
