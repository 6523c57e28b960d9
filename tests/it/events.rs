//! State-transition events, observed in-process: the server runs from the library and the test
//! subscribes to its bus while driving it over real HTTP.

use std::time::Duration;

use serde_json::json;

use crate::support::{call_start_body, complete_body, deadline, pause_id, Client, TempDir};
use cideldill_server::config::Config;
use cideldill_server::events::{Event, EventKind};

fn next(rx: &crossbeam_channel::Receiver<Event>) -> Event {
    rx.recv_timeout(deadline())
        .expect("an event within the deadline")
}

#[test]
fn every_transition_is_published_in_order() {
    let dir = TempDir::new("events");
    let running = cideldill_server::app::start(Config::for_tests(dir.path().join("port"))).unwrap();
    let rx = running.shared().bus.subscribe();
    let c = Client {
        port: running.port(),
    };

    c.post_ok("/api/breakpoints", &json!({"function_name": "add"}));
    assert_eq!(*next(&rx).kind, EventKind::BreakpointsChanged);
    let start = c.post_ok(
        "/api/call/start",
        &call_start_body("add", vec![], json!({})),
    );
    let before = pause_id(&start);
    let paused = next(&rx);
    match &*paused.kind {
        EventKind::ExecutionPaused {
            pause_id,
            method_name,
            pause_reason,
            paused_at,
        } => {
            assert_eq!(
                (
                    pause_id.as_str(),
                    method_name.as_str(),
                    pause_reason.as_str()
                ),
                (before.as_str(), "add", "breakpoint")
            );
            assert!(*paused_at > 1.0e9);
        }
        other => panic!("expected execution_paused, got {other:?}"),
    }
    assert_eq!(paused.name(), "execution_paused");
    assert_eq!(paused.params()["pause_id"], before.as_str());

    c.post_ok(
        &format!("/api/paused/{before}/continue"),
        &json!({"action": "skip", "fake_result": 1}),
    );
    let resumed = next(&rx);
    assert_eq!(
        *resumed.kind,
        EventKind::ExecutionResumed {
            pause_id: before.clone(),
            method_name: "add".into(),
            action: "skip".into()
        }
    );

    let done = c.post_ok(
        "/api/call/complete",
        &complete_body(start["call_id"].as_str().unwrap(), &json!(1)),
    );
    let completed = next(&rx);
    assert_eq!(
        *completed.kind,
        EventKind::CallCompleted {
            call_id: start["call_id"].as_str().unwrap().into(),
            method_name: "add".into(),
            status: "success".into(),
            // The call's process, as its key: start time and pid.
            process_key: Some("1795311683.721166+16759".into()),
        }
    );
    let after_id = pause_id(&done);
    let after = next(&rx);
    assert!(
        matches!(&*after.kind, EventKind::ExecutionPaused { pause_id, .. } if *pause_id == after_id)
    );
    let seqs = [paused.seq, resumed.seq, completed.seq, after.seq];
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "sequence numbers increase: {seqs:?}"
    );
    assert!(
        rx.recv_timeout(Duration::from_millis(50)).is_err(),
        "no spurious events"
    );
    running.stop();
    assert!(
        !dir.path().join("port").exists(),
        "stop removes the port file"
    );
}

#[test]
fn a_labelled_and_a_deleted_run_are_published() {
    let dir = TempDir::new("events-delete");
    let running = cideldill_server::app::start(Config::for_tests(dir.path().join("port"))).unwrap();
    let c = Client {
        port: running.port(),
    };
    let start = c.post_ok(
        "/api/call/start",
        &call_start_body("add", vec![], json!({})),
    );
    c.post_ok(
        "/api/call/complete",
        &complete_body(start["call_id"].as_str().unwrap(), &json!(1)),
    );
    let rx = running.shared().bus.subscribe();
    // A new label (from any face) is told, so open Runs pages refresh.
    c.post_ok(
        "/api/runs/1795311683.721166%2B16759/label",
        &json!({"label": "baseline"}),
    );
    let changed = next(&rx);
    assert_eq!(changed.name(), "run_changed");
    assert_eq!(
        changed.params(),
        json!({"run_id": "1795311683.721166+16759"})
    );
    let r = c.delete("/api/runs/1795311683.721166%2B16759");
    assert_eq!(r.status, 200, "{}", r.text());
    let deleted = next(&rx);
    assert_eq!(
        *deleted.kind,
        EventKind::RunDeleted {
            run_id: "1795311683.721166+16759".into()
        }
    );
    assert_eq!(deleted.name(), "run_deleted");
    assert_eq!(
        deleted.params(),
        json!({"run_id": "1795311683.721166+16759"})
    );
    running.stop();
}
