//! What the HTTP face writes to the log about a request. Every URL, `Host` or `Origin` a log
//! line names goes through [`loggable`] (or [`loggable_value`]): secrets in the query
//! (`code`, `state`, `access_token`, ... of an OAuth callback, whatever its answer) are
//! replaced by `[<name> redacted]`, and the text is cut to `limits::LOGGED_URL_BYTES`, so no client
//! chooses how much a line weighs. Refusals (421, 403) are logged through [`RefusalLog`]: at
//! most `limits::REFUSAL_LOG_LINES` warnings per `limits::REFUSAL_LOG_WINDOW`, the rest counted
//! and summarised in one line ("N more refused requests from M origins"), so a page that keeps
//! being refused cannot flood the log. Pure: the caller holds the clock and the lock.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::limits::{LOGGED_URL_BYTES, REFUSAL_LOG_LINES, REFUSAL_LOG_WINDOW};

/// Query parameters (compared without case, after percent-decoding) whose values never reach
/// the log.
pub const SECRET_PARAMS: [&str; 14] = [
    "code",
    "state",
    "access_token",
    "refresh_token",
    "id_token",
    "token",
    "client_secret",
    "password",
    "passwd",
    "secret",
    "api_key",
    "apikey",
    "key",
    "code_verifier",
];

/// Headers whose values never reach the log.
pub const SECRET_HEADERS: [&str; 5] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
];

/// What stands for a secret in the log.
const REDACTED: &str = "redacted";

fn is_secret_param(name: &str) -> bool {
    let name = crate::urlenc::percent_decode(name).to_ascii_lowercase();
    SECRET_PARAMS.contains(&name.trim())
}

/// A request target as a log line shows it: secret query parameters redacted, then cut to
/// `LOGGED_URL_BYTES` (with the number of bytes cut).
pub fn loggable(url: &str) -> String {
    let redacted = match url.split_once('?') {
        None => url.to_owned(),
        Some((path, query)) => {
            let parts: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    // Without `=`: the line shows no `name=value` for a secret at all.
                    Some((k, _)) if is_secret_param(k) => format!("[{k} {REDACTED}]"),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", parts.join("&"))
        }
    };
    cut(&redacted)
}

/// A header value as a log line shows it: redacted for the headers of `SECRET_HEADERS`, cut to
/// `LOGGED_URL_BYTES` otherwise.
pub fn loggable_value(header: &str, value: &str) -> String {
    if SECRET_HEADERS.contains(&header.to_ascii_lowercase().as_str()) {
        return format!("[{REDACTED}]");
    }
    cut(value)
}

/// `text` cut to `LOGGED_URL_BYTES` at a character boundary, saying how much was cut.
fn cut(text: &str) -> String {
    if text.len() <= LOGGED_URL_BYTES {
        return text.to_owned();
    }
    let mut end = LOGGED_URL_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…<cut: {} bytes>", &text[..end], text.len() - end)
}

/// Origins remembered for a summary (each at most `LOGGED_URL_BYTES`); past them, the summary
/// says "more than".
const SUMMARY_ORIGINS: usize = 64;

/// The refusals left out of the log since the window began.
#[derive(Debug, PartialEq, Eq)]
pub struct Summary {
    pub requests: u64,
    pub origins: usize,
    /// More origins than were counted.
    pub more: bool,
    pub over: Duration,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let origins = match (self.origins, self.more) {
            (n, true) => format!("more than {n} origins"),
            (1, false) => "1 origin".to_owned(),
            (n, false) => format!("{n} origins"),
        };
        write!(
            f,
            "http: {} more refused requests from {origins} in the last {:.0} s were not logged \
             (at most {REFUSAL_LOG_LINES} are logged every {} s)",
            self.requests,
            self.over.as_secs_f64(),
            REFUSAL_LOG_WINDOW.as_secs()
        )
    }
}

/// What to do with one refusal.
#[derive(Debug, PartialEq, Eq)]
pub enum Note {
    /// Log its line, after this summary of the previous window's silent ones.
    Log(Option<Summary>),
    /// Count it only.
    Quiet,
}

/// The rate limit of refusal warnings.
#[derive(Debug, Default)]
pub struct RefusalLog {
    /// When the current window began (none: no refusal yet, or the last summary was given).
    window: Option<Instant>,
    logged: usize,
    quiet: u64,
    /// The origins of the quiet ones (`""` for requests without one), at most
    /// `SUMMARY_ORIGINS`.
    quiet_origins: BTreeSet<String>,
    more_origins: bool,
}

impl RefusalLog {
    /// A refusal at `now` of a request from `origin`.
    pub fn note(&mut self, now: Instant, origin: Option<&str>) -> Note {
        let summary = self.roll(now);
        self.window.get_or_insert(now);
        if self.logged < REFUSAL_LOG_LINES {
            self.logged += 1;
            return Note::Log(summary);
        }
        self.quiet += 1;
        let origin = cut(origin.unwrap_or(""));
        if !self.quiet_origins.contains(&origin) {
            if self.quiet_origins.len() < SUMMARY_ORIGINS {
                self.quiet_origins.insert(origin);
            } else {
                self.more_origins = true;
            }
        }
        Note::Quiet
    }

    /// When the summary of the quiet refusals is due (none when there are none).
    pub fn due(&self) -> Option<Instant> {
        (self.quiet > 0)
            .then(|| self.window.map(|w| w + REFUSAL_LOG_WINDOW))
            .flatten()
    }

    /// The summary of the quiet refusals, if their window is over at `now`.
    pub fn take_due(&mut self, now: Instant) -> Option<Summary> {
        let summary = self.roll(now);
        if summary.is_some() {
            // Nothing was refused since: the next refusal opens a window of its own.
            self.window = None;
        }
        summary
    }

    /// Ends the window if it is over at `now`: its summary, when some were quiet.
    fn roll(&mut self, now: Instant) -> Option<Summary> {
        let start = self.window?;
        let over = now.saturating_duration_since(start);
        if over < REFUSAL_LOG_WINDOW {
            return None;
        }
        let summary = (self.quiet > 0).then_some(Summary {
            requests: self.quiet,
            origins: self.quiet_origins.len(),
            more: self.more_origins,
            over,
        });
        *self = RefusalLog {
            window: Some(now),
            ..RefusalLog::default()
        };
        summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_in_the_query_are_redacted_whatever_their_case_or_encoding() {
        assert_eq!(
            loggable("/oauth/callback?code=SECRET1&state=S2&iss=https%3A%2F%2Fa"),
            "/oauth/callback?[code redacted]&[state redacted]&iss=https%3A%2F%2Fa"
        );
        for name in [
            "access_token",
            "Refresh_Token",
            "TOKEN",
            "client_secret",
            "password",
            "%63ode",
        ] {
            let line = loggable(&format!("/x?a=1&{name}=hunter2&b=2"));
            assert!(!line.contains("hunter2"), "{line}");
            assert!(
                line.starts_with("/x?a=1&") && line.ends_with("&b=2"),
                "{line}"
            );
        }
        // Nothing else is touched.
        assert_eq!(loggable("/api/poll/x?codes=1"), "/api/poll/x?codes=1");
        assert_eq!(loggable("/api/status"), "/api/status");
        assert_eq!(loggable_value("Authorization", "Bearer abc"), "[redacted]");
        assert_eq!(loggable_value("Host", "localhost:1"), "localhost:1");
    }

    #[test]
    fn long_texts_are_cut_at_a_character_boundary() {
        let long = format!("/api/poll/{}", "é".repeat(40_000));
        let line = loggable(&long);
        assert!(line.len() < LOGGED_URL_BYTES + 40, "{}", line.len());
        assert!(line.contains("…<cut: "), "{line}");
        // A secret past the cut is gone with it; one before it is redacted.
        let line = loggable(&format!("/x?code=abc&pad={}", "a".repeat(70_000)));
        assert!(!line.contains("abc"), "{line}");
        let line = loggable_value("Origin", &"o".repeat(70_000));
        assert!(line.len() < LOGGED_URL_BYTES + 40);
    }

    #[test]
    fn refusals_are_logged_up_to_the_limit_then_counted_and_summarised() {
        let mut log = RefusalLog::default();
        let t0 = Instant::now();
        for _ in 0..REFUSAL_LOG_LINES {
            assert_eq!(log.note(t0, Some("http://a.example")), Note::Log(None));
        }
        assert_eq!(log.due(), None, "nothing quiet yet");
        for i in 0..1000 {
            let origin = format!("http://site{}.example", i % 17);
            assert_eq!(log.note(t0, Some(&origin)), Note::Quiet);
        }
        assert_eq!(log.note(t0, None), Note::Quiet);
        assert_eq!(log.due(), Some(t0 + REFUSAL_LOG_WINDOW));
        assert_eq!(log.take_due(t0 + REFUSAL_LOG_WINDOW / 2), None, "not yet");
        // The next refusal after the window is logged, after the summary.
        let later = t0 + REFUSAL_LOG_WINDOW;
        let Note::Log(Some(summary)) = log.note(later, Some("http://b.example")) else {
            panic!("a summary is due");
        };
        assert_eq!(
            (summary.requests, summary.origins, summary.more),
            (1001, 18, false)
        );
        let line = summary.to_string();
        assert!(
            line.contains("1001 more refused requests from 18 origins"),
            "{line}"
        );
        // Or, when nothing more comes, the summary is taken when due.
        for _ in 0..REFUSAL_LOG_LINES + 3 {
            log.note(later, Some("http://b.example"));
        }
        let end = later + REFUSAL_LOG_WINDOW;
        assert_eq!(log.due(), Some(end));
        let summary = log.take_due(end).expect("due");
        assert_eq!((summary.requests, summary.origins), (4, 1));
        assert_eq!(log.due(), None);
        assert_eq!(log.take_due(end + REFUSAL_LOG_WINDOW), None);
        assert_eq!(log.note(end, None), Note::Log(None), "a new window");
    }

    #[test]
    fn the_origins_of_a_summary_are_bounded() {
        let mut log = RefusalLog::default();
        let t0 = Instant::now();
        for i in 0..REFUSAL_LOG_LINES + 10_000 {
            log.note(t0, Some(&format!("http://{i}.{}", "x".repeat(1000))));
        }
        assert_eq!(log.quiet_origins.len(), SUMMARY_ORIGINS);
        assert!(log
            .quiet_origins
            .iter()
            .all(|o| o.len() < LOGGED_URL_BYTES + 40));
        let s = log.take_due(t0 + REFUSAL_LOG_WINDOW).unwrap();
        assert!(s.more);
        assert!(s.to_string().contains("more than 64 origins"), "{s}");
    }
}
