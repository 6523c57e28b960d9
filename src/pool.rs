//! A self-sizing pool of named threads for jobs that may block (an MCP tool waiting for a pause,
//! for the program's REPL answer or for an external MCP server).
//!
//! A job goes to an idle thread when there is one and starts a new thread when there is none,
//! so a blocking job never waits for another to finish. Threads that stay idle past `linger`
//! exit while more than `keep_idle` others are idle. Reusing a parked thread costs one wake-up
//! instead of a thread start (tens of microseconds on a small VM).
//!
//! Callers that must wait for their jobs (a transport closing its session) hold a [`Joiner`].

use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError, Sender};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Cloneable handle to the pool.
#[derive(Clone)]
pub struct Pool {
    inner: Arc<Inner>,
}

struct Inner {
    name: &'static str,
    tx: Sender<Job>,
    rx: Receiver<Job>,
    /// Threads waiting for a job that no queued job is meant for.
    idle: AtomicUsize,
    /// Threads alive.
    live: AtomicUsize,
    keep_idle: usize,
    linger: Duration,
}

impl Pool {
    pub fn new(name: &'static str, keep_idle: usize, linger: Duration) -> Pool {
        let (tx, rx) = unbounded();
        Pool {
            inner: Arc::new(Inner {
                name,
                tx,
                rx,
                idle: AtomicUsize::new(0),
                live: AtomicUsize::new(0),
                keep_idle,
                linger,
            }),
        }
    }

    /// Runs `job` on an idle thread, or on a new one. Fails only when no thread can be started
    /// (the job is then dropped without running).
    pub fn run(&self, job: impl FnOnce() + Send + 'static) -> io::Result<()> {
        let inner = &self.inner;
        let claimed = inner
            .idle
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if !claimed {
            inner.live.fetch_add(1, Ordering::SeqCst);
            let worker = Arc::clone(inner);
            if let Err(e) = thread::Builder::new()
                .name(inner.name.into())
                .spawn(move || worker.work())
            {
                inner.live.fetch_sub(1, Ordering::SeqCst);
                return Err(e);
            }
        }
        // Cannot fail: the pool holds a receiver.
        let _ = inner.tx.send(Box::new(job));
        Ok(())
    }

    /// Threads alive (for tests and status).
    pub fn live(&self) -> usize {
        self.inner.live.load(Ordering::SeqCst)
    }

    /// Threads idle.
    pub fn idle(&self) -> usize {
        self.inner.idle.load(Ordering::SeqCst)
    }
}

impl Inner {
    fn work(&self) {
        loop {
            match self.rx.recv_timeout(self.linger) {
                Ok(job) => {
                    // A job guards its own answer; this only keeps the thread's count right.
                    if catch_unwind(AssertUnwindSafe(job)).is_err() {
                        log::error!("{}: a job panicked", self.name);
                    }
                    self.idle.fetch_add(1, Ordering::SeqCst);
                }
                Err(RecvTimeoutError::Timeout) => {
                    let keep = self.keep_idle;
                    let left = self
                        .idle
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                            (n > keep).then(|| n - 1)
                        })
                        .is_ok();
                    if left {
                        break;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Waits for a group of jobs: each job holds a [`JobToken`]; [`Joiner::join`] returns once
/// every token is dropped.
pub struct Joiner {
    tx: Sender<()>,
    rx: Receiver<()>,
}

/// Held by a job of a [`Joiner`]'s group until it ends.
pub struct JobToken {
    _tx: Sender<()>,
}

impl Default for Joiner {
    fn default() -> Self {
        let (tx, rx) = crossbeam_channel::bounded(0);
        Joiner { tx, rx }
    }
}

impl Joiner {
    pub fn token(&self) -> JobToken {
        JobToken {
            _tx: self.tx.clone(),
        }
    }

    /// Blocks until every token handed out is dropped.
    pub fn join(self) {
        drop(self.tx);
        // Nothing is ever sent: this returns when the last sender is gone.
        let _ = self.rx.recv();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;
    use std::time::Instant;

    #[test]
    fn blocking_jobs_each_get_a_thread_and_threads_are_reused() {
        let pool = Pool::new("t-pool", 1, Duration::from_secs(30));
        let barrier = Arc::new(Barrier::new(5));
        let joiner = Joiner::default();
        for _ in 0..4 {
            let b = Arc::clone(&barrier);
            let token = joiner.token();
            pool.run(move || {
                // Every job blocks until all four run at once: a pool that queued one behind
                // another would never get here.
                b.wait();
                drop(token);
            })
            .unwrap();
        }
        barrier.wait();
        joiner.join();
        assert_eq!(pool.live(), 4);
        let deadline = Instant::now() + Duration::from_secs(5);
        while pool.idle() < 4 {
            assert!(Instant::now() < deadline, "threads never came back idle");
            thread::sleep(Duration::from_millis(1));
        }
        // Idle threads are reused, not added to.
        let (tx, rx) = crossbeam_channel::bounded(8);
        for i in 0..4 {
            let tx = tx.clone();
            pool.run(move || tx.send(i).unwrap()).unwrap();
        }
        let mut got: Vec<i32> = (0..4)
            .map(|_| rx.recv_timeout(Duration::from_secs(5)).unwrap())
            .collect();
        got.sort();
        assert_eq!(got, [0, 1, 2, 3]);
        assert_eq!(pool.live(), 4);
    }

    #[test]
    fn idle_threads_beyond_keep_idle_exit_after_linger_and_a_panic_keeps_the_thread() {
        let pool = Pool::new("t-pool", 1, Duration::from_millis(20));
        let barrier = Arc::new(Barrier::new(4));
        for _ in 0..3 {
            let b = Arc::clone(&barrier);
            pool.run(move || {
                b.wait();
            })
            .unwrap();
        }
        barrier.wait();
        let deadline = Instant::now() + Duration::from_secs(5);
        while pool.live() > 1 {
            assert!(Instant::now() < deadline, "idle threads never exited");
            thread::sleep(Duration::from_millis(5));
        }
        thread::sleep(Duration::from_millis(60));
        assert_eq!(pool.live(), 1, "keep_idle threads stay");
        pool.run(|| panic!("job panics (expected in this test)"))
            .unwrap();
        while pool.idle() < 1 {
            assert!(
                Instant::now() < deadline,
                "the thread never came back after the panic"
            );
            thread::sleep(Duration::from_millis(1));
        }
        let (tx, rx) = crossbeam_channel::bounded(1);
        pool.run(move || tx.send(()).unwrap()).unwrap();
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(pool.live(), 1);
    }

    #[test]
    fn join_without_tokens_returns_at_once() {
        Joiner::default().join();
    }
}
