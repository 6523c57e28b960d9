//! Unit tests of `crate::upstream::manager`.

use super::*;

fn stdio(name: &str, command: &str) -> ServerConfig {
    ServerConfig::new(
        name,
        Transport::Stdio {
            command: command.into(),
            args: vec![],
            env: vec![],
            cwd: None,
        },
    )
}

#[test]
fn only_400_404_and_405_fall_back_to_legacy_sse() {
    for status in [400, 404, 405] {
        assert!(falls_back_to_sse(status), "{status}");
    }
    for status in [401, 403, 406, 415, 429, 500, 502] {
        assert!(!falls_back_to_sse(status), "{status}");
    }
}

// A new manager knows no server and no tool and holds no thread; the first server wakes
// it (the supervisor, then the first watcher); shutdown joins its thread and can be
// called twice.
#[test]
fn a_new_manager_is_idle_until_a_server_is_connected() {
    let m = Manager::idle(Timing::default());
    let (made_tx, made_rx) = unbounded();
    m.on_first_use(Box::new(move || {
        let (tx, rx) = unbounded();
        let _ = made_tx.send(rx);
        Ok(tx)
    }));
    assert!(
        matches!(*lock(&m.supervisor), Supervisor::Idle { .. }),
        "no supervisor thread yet"
    );
    assert_eq!(m.servers(), json!({}));
    assert_eq!(m.tools(None).unwrap(), Vec::<Value>::new());
    assert_eq!(
        m.resources(None).unwrap(),
        json!({"resources": [], "errors": {}})
    );
    assert!(made_rx.try_recv().is_err(), "no watcher made yet");
    // `true` exits at once: the connection fails, but the manager is awake.
    let err = m.connect(stdio("quick", "true")).unwrap_err();
    assert_eq!(err.code(), "connect_failed", "{err:?}");
    assert!(matches!(*lock(&m.supervisor), Supervisor::Running(_)));
    let watcher = made_rx.try_recv().expect("the first watcher was made");
    assert_eq!(
        watcher.try_iter().map(|(n, _)| n).next().as_deref(),
        Some("quick"),
        "it hears the status changes"
    );
    m.shutdown();
    assert!(
        matches!(*lock(&m.supervisor), Supervisor::Stopped),
        "shutdown joined the supervisor"
    );
    m.shutdown();
    let err = m.connect(stdio("late", "true")).unwrap_err();
    assert_eq!(err.code(), "shutting_down");
}

// Shutting down a manager that never woke is immediate and leaves nothing behind.
#[test]
fn an_idle_manager_shuts_down() {
    let m = Manager::start(Vec::new(), Timing::default()).unwrap();
    assert!(matches!(*lock(&m.supervisor), Supervisor::Idle { .. }));
    m.shutdown();
    assert!(matches!(*lock(&m.supervisor), Supervisor::Stopped));
    assert_eq!(
        m.connect(stdio("late", "true")).unwrap_err().code(),
        "shutting_down"
    );
}

#[test]
fn the_backoff_schedule_scales_from_its_base() {
    let t = Timing::default().with_backoff_base(Duration::from_millis(100));
    assert_eq!(
        t.backoff,
        [100, 200, 400, 800, 1600]
            .map(Duration::from_millis)
            .to_vec()
    );
    assert_eq!(
        Timing::default().backoff,
        [1, 2, 4, 8, 16].map(Duration::from_secs).to_vec()
    );
}
