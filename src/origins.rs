//! Browser origins granted, pending and denied: a web page may use the browser-client endpoints
//! (report its calls, poll its pauses) only from the server's own origins, an `--allow-origin`
//! one, or an origin the user granted in the web UI. A refused page's origin waits here as a
//! pending request ("wants to report calls to this debugger: Allow / Deny") until the user
//! answers. Pure: no I/O, no locks; the grants are persisted by `service::settings`.
//!
//! Bounded: `MAX_PENDING_ORIGINS` pending requests and as many denials (the oldest is
//! forgotten), `MAX_GRANTED_ORIGINS` grants (one more is refused), origins of at most
//! `MAX_ORIGIN_BYTES`. What refused requests make the web UI hear is bounded too: a change of
//! the pending list is told (`origins_changed`) at most once per `ORIGINS_EVENT_INTERVAL`, the
//! changes since in one event at its end (`notice_due`, `take_notice`).

use std::collections::VecDeque;
use std::time::Instant;

use serde::Serialize;

use crate::limits::{
    MAX_GRANTED_ORIGINS, MAX_ORIGIN_BYTES, MAX_PENDING_ORIGINS, ORIGINS_EVENT_INTERVAL,
};

/// An origin that asked and was refused, waiting for the user's answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Pending {
    pub origin: String,
    /// The first and the last refused request.
    pub first_at: f64,
    pub last_at: f64,
    /// Refused requests so far.
    pub requests: u64,
    /// The path of the first one.
    pub path: String,
}

#[derive(Debug, Default)]
pub struct Origins {
    granted: Vec<String>,
    pending: VecDeque<Pending>,
    denied: VecDeque<String>,
    /// `origins_changed` for the pending list, at most once per `ORIGINS_EVENT_INTERVAL`.
    notice: Notice,
}

/// When the pending list's change was last told, and whether a change since waits.
#[derive(Debug, Default)]
struct Notice {
    told: Option<Instant>,
    waiting: bool,
}

/// Why a grant was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum GrantError {
    /// Not an origin (`scheme://host[:port]`).
    Invalid(String),
    /// `MAX_GRANTED_ORIGINS` are granted already.
    Full,
}

/// An `Origin` header's value as compared and kept: trimmed, lowercase, without a trailing
/// slash; `None` unless it is `http://` or `https://` with a host and nothing after it (`null`,
/// the origin of files and sandboxed frames, is not one that can be granted) and at most
/// `MAX_ORIGIN_BYTES`.
pub fn normalize(origin: &str) -> Option<String> {
    let o = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    if o.len() > MAX_ORIGIN_BYTES {
        return None;
    }
    let rest = o
        .strip_prefix("http://")
        .or_else(|| o.strip_prefix("https://"))?;
    let ok = !rest.is_empty()
        && rest.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']' | b'_')
        });
    ok.then_some(o)
}

impl Origins {
    /// Whether the user granted this origin.
    pub fn is_granted(&self, origin: &str) -> bool {
        normalize(origin).is_some_and(|o| self.granted.contains(&o))
    }

    pub fn granted(&self) -> &[String] {
        &self.granted
    }

    pub fn pending(&self) -> impl Iterator<Item = &Pending> {
        self.pending.iter()
    }

    pub fn denied(&self) -> impl Iterator<Item = &String> {
        self.denied.iter()
    }

    /// Notes a refused request of `origin`: a new pending request unless it was denied or is
    /// not an origin. Returns whether the pending list got a new entry (worth telling the UI).
    pub fn refused(&mut self, origin: &str, path: &str, now: f64) -> bool {
        let Some(o) = normalize(origin) else {
            return false;
        };
        if self.denied.contains(&o) || self.granted.contains(&o) {
            return false;
        }
        if let Some(p) = self.pending.iter_mut().find(|p| p.origin == o) {
            p.last_at = now;
            p.requests += 1;
            return false;
        }
        let path: String = path.chars().take(200).collect();
        self.pending.push_back(Pending {
            origin: o,
            first_at: now,
            last_at: now,
            requests: 1,
            path,
        });
        while self.pending.len() > MAX_PENDING_ORIGINS {
            self.pending.pop_front();
        }
        true
    }

    /// The pending list changed at `now`: whether to tell it now (else it waits for
    /// `notice_due`).
    pub fn tell_change(&mut self, now: Instant) -> bool {
        let free = self
            .notice
            .told
            .is_none_or(|t| now.saturating_duration_since(t) >= ORIGINS_EVENT_INTERVAL);
        if free && !self.notice.waiting {
            self.notice.told = Some(now);
            return true;
        }
        self.notice.waiting = true;
        false
    }

    /// When a waiting change is to be told.
    pub fn notice_due(&self) -> Option<Instant> {
        self.notice
            .waiting
            .then(|| self.notice.told.map(|t| t + ORIGINS_EVENT_INTERVAL))
            .flatten()
    }

    /// Whether a waiting change is due at `now`: it then counts as told.
    pub fn take_notice(&mut self, now: Instant) -> bool {
        if self.notice_due().is_some_and(|due| now >= due) {
            self.notice = Notice {
                told: Some(now),
                waiting: false,
            };
            return true;
        }
        false
    }

    /// Grants `origin` (for this session; the caller persists it).
    pub fn allow(&mut self, origin: &str) -> Result<String, GrantError> {
        let o = normalize(origin).ok_or_else(|| GrantError::Invalid(origin.to_owned()))?;
        if !self.granted.contains(&o) {
            if self.granted.len() >= MAX_GRANTED_ORIGINS {
                return Err(GrantError::Full);
            }
            self.granted.push(o.clone());
        }
        self.pending.retain(|p| p.origin != o);
        self.denied.retain(|d| *d != o);
        Ok(o)
    }

    /// Denies `origin`: a grant is revoked, its pending request goes, and its requests stay
    /// refused without asking again (until it is allowed).
    pub fn deny(&mut self, origin: &str) -> Result<String, GrantError> {
        let o = normalize(origin).ok_or_else(|| GrantError::Invalid(origin.to_owned()))?;
        self.granted.retain(|g| *g != o);
        self.pending.retain(|p| p.origin != o);
        if !self.denied.contains(&o) {
            self.denied.push_back(o.clone());
            while self.denied.len() > MAX_PENDING_ORIGINS {
                self.denied.pop_front();
            }
        }
        Ok(o)
    }

    /// Restores the grants read from the database.
    pub fn restore(&mut self, granted: &[String]) {
        self.granted = granted
            .iter()
            .filter_map(|o| normalize(o))
            .take(MAX_GRANTED_ORIGINS)
            .collect();
        self.granted.dedup();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_real_origins_are_kept_and_compared_normalized() {
        assert_eq!(
            normalize(" HTTP://LocalHost:3000/ ").as_deref(),
            Some("http://localhost:3000")
        );
        assert_eq!(
            normalize("https://[::1]:8443").as_deref(),
            Some("https://[::1]:8443")
        );
        for bad in [
            "null",
            "",
            "file://",
            "http://",
            "http://a/b",
            "http://a b",
            "javascript:alert(1)",
        ] {
            assert_eq!(normalize(bad), None, "{bad}");
        }
        let long = format!("http://{}", "a".repeat(MAX_ORIGIN_BYTES));
        assert_eq!(normalize(&long), None);
    }

    #[test]
    fn changes_of_the_pending_list_are_told_at_most_once_per_interval() {
        let mut o = Origins::default();
        let t0 = Instant::now();
        assert!(o.tell_change(t0), "the first at once");
        assert_eq!(o.notice_due(), None);
        for i in 1..1000 {
            let now = t0 + ORIGINS_EVENT_INTERVAL * i / 2000;
            assert!(!o.tell_change(now), "the rest wait");
        }
        let due = t0 + ORIGINS_EVENT_INTERVAL;
        assert_eq!(o.notice_due(), Some(due));
        assert!(!o.take_notice(due - ORIGINS_EVENT_INTERVAL / 10), "not yet");
        assert!(o.take_notice(due), "told once at the end of the interval");
        assert!(!o.take_notice(due), "and only once");
        assert_eq!(o.notice_due(), None);
        // Still within an interval of the last one told: it waits again.
        assert!(!o.tell_change(due));
        assert_eq!(o.notice_due(), Some(due + ORIGINS_EVENT_INTERVAL));
        // Long after, with nothing waiting, a change is told at once.
        let mut quiet = Origins::default();
        assert!(quiet.tell_change(t0));
        assert!(quiet.tell_change(t0 + ORIGINS_EVENT_INTERVAL));
    }

    #[test]
    fn requests_wait_until_allowed_or_denied_and_stay_bounded() {
        let mut o = Origins::default();
        assert!(o.refused("http://localhost:3000", "/api/call/start", 1.0));
        assert!(!o.refused("http://localhost:3000/", "/api/poll/x", 2.0));
        let p: Vec<_> = o.pending().collect();
        assert_eq!((p.len(), p[0].requests, p[0].last_at), (1, 2, 2.0));
        assert_eq!(
            o.allow("http://localhost:3000").unwrap(),
            "http://localhost:3000"
        );
        assert!(o.is_granted("http://LOCALHOST:3000"));
        assert_eq!(o.pending().count(), 0);
        assert!(!o.refused("http://localhost:3000", "/", 3.0), "granted");
        o.deny("http://localhost:3000").unwrap();
        assert!(!o.is_granted("http://localhost:3000"), "a denial revokes");
        assert!(
            !o.refused("http://localhost:3000", "/", 4.0),
            "denied: not asked again"
        );
        assert_eq!(o.pending().count(), 0);
        for i in 0..MAX_PENDING_ORIGINS + 5 {
            assert!(o.refused(&format!("http://site{i}.example"), "/", i as f64));
        }
        assert_eq!(o.pending().count(), MAX_PENDING_ORIGINS);
        assert_eq!(o.pending().next().unwrap().origin, "http://site5.example");
        assert!(!o.refused("null", "/", 1.0));
        for i in 0..MAX_GRANTED_ORIGINS {
            o.allow(&format!("http://g{i}.example")).unwrap();
        }
        assert_eq!(o.allow("http://one-more.example"), Err(GrantError::Full));
        assert!(matches!(o.allow("null"), Err(GrantError::Invalid(_))));
        let mut again = Origins::default();
        again.restore(o.granted());
        assert!(again.is_granted("http://g0.example"));
    }
}
