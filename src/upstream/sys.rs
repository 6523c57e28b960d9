//! The one module with `unsafe` code: signals to a child's process group.
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
#![allow(unsafe_code)]

use std::io;

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
