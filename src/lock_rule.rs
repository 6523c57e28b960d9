//! The lock rule, checked at run time in debug builds: no thread reads or writes the content
//! store or renders a payload while it holds the state lock (`state::StateGuard`). The guard
//! counts itself here; the store's I/O and the renderer call [`assert_unlocked`]. Tests run
//! debug builds, so a request that breaks the rule fails with a panic (a 500) in every test
//! that takes that path. Release builds compile all of it away.

#[cfg(debug_assertions)]
thread_local! {
    static HELD: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// The state lock was taken on this thread.
pub(crate) fn locked() {
    #[cfg(debug_assertions)]
    HELD.with(|h| h.set(h.get() + 1));
}

/// The state lock was released on this thread.
pub(crate) fn unlocked() {
    #[cfg(debug_assertions)]
    HELD.with(|h| h.set(h.get().saturating_sub(1)));
}

/// Panics in a debug build if this thread holds the state lock; `what` names the operation.
#[track_caller]
pub(crate) fn assert_unlocked(what: &str) {
    #[cfg(debug_assertions)]
    HELD.with(|h| {
        assert!(
            h.get() == 0,
            "lock rule: {what} while the state lock is held"
        );
    });
    #[cfg(not(debug_assertions))]
    let _ = what;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(debug_assertions)]
    fn io_under_the_state_lock_is_caught() {
        locked();
        let caught = std::panic::catch_unwind(|| assert_unlocked("reading a record"));
        unlocked();
        let msg = caught.expect_err("must panic");
        let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            msg.contains("reading a record while the state lock is held"),
            "{msg}"
        );
        assert_unlocked("after the lock is released");
    }
}
