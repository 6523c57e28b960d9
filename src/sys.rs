//! The one module with `unsafe` code: signals to a child's process group, the malloc arena
//! limit set once at start-up, and the open-file limit raised at start-up.
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
//!
//! Why the open-file limit: every connection costs file descriptors, and a server that reaches
//! its limit refuses work while it lives on. Most systems start processes with a soft limit of
//! 1,024 under a much higher hard limit that an unprivileged process may raise its soft limit
//! to. `getrlimit(2)` and `setrlimit(2)` read and write one `rlimit` struct that we own.
//!
//! Why the file lock: two servers appending to one database file overwrite each other's
//! records (each keeps its own idea of where the file ends), so a server takes an exclusive
//! `flock(2)` on its database at open and a second one refuses to start. `flock` takes a file
//! descriptor that we own (borrowed from a `File` that outlives the call) and an integer, and
//! touches no memory of ours; the lock lives as long as the open file description, so it is
//! released when the store's file is closed (or the process dies). `geteuid(2)` takes nothing
//! and cannot fail.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::AsRawFd;

/// Takes an exclusive lock on `file` without waiting: `Ok(false)` when another open file
/// description holds a lock on it (another process, or another open of the same file).
pub fn try_lock_exclusive(file: &std::fs::File) -> io::Result<bool> {
    loop {
        // SAFETY: the descriptor belongs to `file`, which is borrowed for the whole call;
        // flock reads two integers and touches no memory of ours.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(true);
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EWOULDBLOCK) => return Ok(false),
            Some(libc::EINTR) => continue,
            _ => return Err(err),
        }
    }
}

/// This process's effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid takes no argument, touches no memory and always succeeds.
    unsafe { libc::geteuid() }
}

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

/// The open-file limit (`RLIMIT_NOFILE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenFiles {
    /// The soft limit in force: the most descriptors this process may hold.
    pub soft: u64,
    pub hard: u64,
    /// The soft limit before [`raise_open_files_limit`] raised it.
    pub raised_from: Option<u64>,
}

/// The open-file limit as it is.
pub fn open_files_limit() -> io::Result<OpenFiles> {
    let lim = nofile()?;
    Ok(OpenFiles {
        soft: rlim_u64(lim.rlim_cur),
        hard: rlim_u64(lim.rlim_max),
        raised_from: None,
    })
}

fn nofile() -> io::Result<libc::rlimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one struct that we own and touches nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(lim)
}

/// Raises the soft open-file limit to the hard one (see the module documentation). When the
/// system refuses (an "unlimited" hard limit may be more than it grants), the limit stays.
pub fn raise_open_files_limit() -> io::Result<OpenFiles> {
    let mut lim = nofile()?;
    let before = rlim_u64(lim.rlim_cur);
    if lim.rlim_cur == lim.rlim_max {
        return open_files_limit();
    }
    lim.rlim_cur = lim.rlim_max;
    // SAFETY: setrlimit reads one struct that we own; raising the soft limit up to the hard one
    // needs no privilege.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(OpenFiles {
        raised_from: Some(before),
        ..open_files_limit()?
    })
}

#[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
fn rlim_u64(v: libc::rlim_t) -> u64 {
    if v == libc::RLIM_INFINITY {
        u64::MAX
    } else {
        v as u64
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
    fn the_open_file_limit_is_raised_to_the_hard_one() {
        let before = open_files_limit().unwrap();
        assert!(before.soft <= before.hard);
        let after = raise_open_files_limit().unwrap();
        assert_eq!(after.soft, after.hard);
        assert_eq!(after.hard, before.hard);
        assert_eq!(open_files_limit().unwrap().soft, after.soft);
    }

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
