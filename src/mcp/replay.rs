//! Resumable event streams of a Streamable HTTP session in the legacy era (MCP 2025-03-26 to
//! 2025-11-25, "Resumability and Redelivery"). Every event a session's streams carry gets an id
//! `<stream>-<seq>`, unique within the session: stream 0 is the session's GET stream, streams
//! 1, 2, ... are the event streams answering its POSTs, and `seq` counts the messages of one
//! stream from 1 (0 is the id of the priming event that opens it). Each stream's messages are
//! kept here, bounded (`limits::MCP_REPLAY_*`), so that a client that lost a stream and comes
//! back with `GET` and `Last-Event-ID` gets the messages of that stream it missed, and no
//! other's. A POST's stream still running is followed after the replay: its later messages go
//! to the resumed connection too. Pure data; `http::mcp_http` writes the streams.
//!
//! The stateless revision 2026-07-28 has no resumability: none of this applies to it.

use std::collections::VecDeque;

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};

use crate::limits;

/// The stream id of a session's GET stream.
pub const STANDALONE: u64 = 0;

/// An event id of ours: which stream, which message of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventId {
    pub stream: u64,
    pub seq: u64,
}

impl EventId {
    /// Reads `<stream>-<seq>` (both decimal); `None` for anything else.
    pub fn parse(text: &str) -> Option<EventId> {
        let (stream, seq) = text.trim().split_once('-')?;
        let num = |t: &str| {
            (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
                .then(|| t.parse::<u64>().ok())
                .flatten()
        };
        Some(EventId {
            stream: num(stream)?,
            seq: num(seq)?,
        })
    }
}

impl std::fmt::Display for EventId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.stream, self.seq)
    }
}

/// A message kept for replay: its sequence number and its JSON text.
pub type Kept = (u64, String);

struct StreamLog {
    id: u64,
    /// The sequence number of the next message (the first is 1).
    next_seq: u64,
    events: VecDeque<Kept>,
    bytes: usize,
    /// More messages may come (a POST's request still runs; the GET stream always).
    open: bool,
    /// The resumed connection following this POST stream, if any.
    follower: Option<Sender<Kept>>,
}

impl StreamLog {
    fn new(id: u64) -> StreamLog {
        StreamLog {
            id,
            next_seq: 1,
            events: VecDeque::new(),
            bytes: 0,
            open: true,
            follower: None,
        }
    }

    /// The lowest sequence number whose message is still kept (or the next one).
    fn first_kept(&self) -> u64 {
        self.events.front().map_or(self.next_seq, |(seq, _)| *seq)
    }

    fn drop_oldest(&mut self) -> usize {
        match self.events.pop_front() {
            Some((_, text)) => {
                self.bytes -= text.len();
                text.len()
            }
            None => 0,
        }
    }
}

/// Why a `Last-Event-ID` cannot be resumed.
#[derive(Debug, PartialEq, Eq)]
pub enum ResumeError {
    /// No event of this session has that id.
    Unknown,
    /// The stream, or messages of it after that id, are no longer kept.
    Forgotten,
}

/// What a resumed connection gets: the messages after the id, and, for a POST stream still
/// running, a receiver of its later messages.
pub struct Resumed {
    pub missed: Vec<Kept>,
    pub follow: Option<Receiver<Kept>>,
}

/// The kept messages of one session's streams.
pub struct Replay {
    streams: VecDeque<StreamLog>,
    next_stream: u64,
    bytes: usize,
    max_events: usize,
    max_streams: usize,
    max_bytes: usize,
}

impl Default for Replay {
    fn default() -> Self {
        Replay::with_limits(
            limits::MCP_REPLAY_EVENTS,
            limits::MCP_REPLAY_STREAMS,
            limits::MCP_REPLAY_BYTES,
        )
    }
}

impl Replay {
    pub fn with_limits(max_events: usize, max_streams: usize, max_bytes: usize) -> Replay {
        Replay {
            streams: VecDeque::new(),
            next_stream: 1,
            bytes: 0,
            max_events: max_events.max(1),
            max_streams: max_streams.max(1),
            max_bytes,
        }
    }

    fn find(&mut self, stream: u64) -> Option<&mut StreamLog> {
        self.streams.iter_mut().find(|s| s.id == stream)
    }

    /// Whether the session's GET stream has been opened (its messages are kept from then on,
    /// also while no GET stream is connected).
    pub fn has_standalone(&self) -> bool {
        self.streams.iter().any(|s| s.id == STANDALONE)
    }

    /// The GET stream's id for a new connection's priming event: the last message it had.
    pub fn open_standalone(&mut self) -> EventId {
        if !self.has_standalone() {
            self.streams.push_back(StreamLog::new(STANDALONE));
            self.trim_streams();
        }
        let seq = self.find(STANDALONE).map_or(0, |s| s.next_seq - 1);
        EventId {
            stream: STANDALONE,
            seq,
        }
    }

    /// A new POST stream; the logs of the oldest streams beyond `max_streams` are forgotten
    /// (finished ones first).
    pub fn new_stream(&mut self) -> u64 {
        let id = self.next_stream;
        self.next_stream += 1;
        self.streams.push_back(StreamLog::new(id));
        self.trim_streams();
        id
    }

    fn trim_streams(&mut self) {
        while self.streams.len() > self.max_streams {
            let victim = self
                .streams
                .iter()
                .position(|s| !s.open)
                .unwrap_or_else(|| {
                    // Every stream is open: the oldest POST stream goes (never the GET stream).
                    self.streams
                        .iter()
                        .position(|s| s.id != STANDALONE)
                        .unwrap_or(0)
                });
            if let Some(gone) = self.streams.remove(victim) {
                self.bytes -= gone.bytes;
            }
        }
    }

    /// Keeps a message of `stream` and hands it to that stream's follower; returns its id.
    pub fn record(&mut self, stream: u64, text: &str) -> EventId {
        let max_events = self.max_events;
        let Some(log) = self.find(stream) else {
            // A forgotten stream: its messages are not kept.
            return EventId { stream, seq: 0 };
        };
        let seq = log.next_seq;
        log.next_seq += 1;
        log.events.push_back((seq, text.to_owned()));
        log.bytes += text.len();
        let mut freed = 0;
        while log.events.len() > max_events {
            freed += log.drop_oldest();
        }
        if let Some(f) = &log.follower {
            match f.try_send((seq, text.to_owned())) {
                Ok(()) => {}
                // A follower that does not keep up is let go: its connection ends, and it may
                // resume again from the last id it got.
                Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                    log.follower = None
                }
            }
        }
        self.bytes = self.bytes + text.len() - freed;
        self.trim_bytes();
        EventId { stream, seq }
    }

    /// Forgets the oldest messages (of the oldest streams, finished ones first) past
    /// `max_bytes`.
    fn trim_bytes(&mut self) {
        while self.bytes > self.max_bytes {
            let victim = self
                .streams
                .iter()
                .position(|s| !s.open && !s.events.is_empty())
                .or_else(|| self.streams.iter().position(|s| !s.events.is_empty()));
            let Some(i) = victim else { return };
            let freed = self.streams[i].drop_oldest();
            self.bytes -= freed;
        }
    }

    /// The POST stream's request ended: nothing more comes on it, and its follower ends.
    pub fn close(&mut self, stream: u64) {
        if let Some(log) = self.find(stream) {
            log.open = false;
            log.follower = None;
        }
    }

    /// The messages of `after`'s stream that came after it; for a POST stream still open, a
    /// receiver of its later messages too (replacing an earlier follower, whose connection
    /// ends).
    pub fn resume(&mut self, after: EventId) -> Result<Resumed, ResumeError> {
        let max_events = self.max_events;
        let known = after.stream < self.next_stream;
        let Some(log) = self.find(after.stream) else {
            return Err(if known && after.stream != STANDALONE {
                ResumeError::Forgotten
            } else {
                ResumeError::Unknown
            });
        };
        if after.seq >= log.next_seq {
            return Err(ResumeError::Unknown);
        }
        if after.seq + 1 < log.first_kept() {
            return Err(ResumeError::Forgotten);
        }
        let missed = log
            .events
            .iter()
            .filter(|(seq, _)| *seq > after.seq)
            .cloned()
            .collect();
        let follow = (log.open && log.id != STANDALONE).then(|| {
            let (tx, rx) = bounded(max_events);
            log.follower = Some(tx);
            rx
        });
        Ok(Resumed { missed, follow })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seqs(r: &Resumed) -> Vec<u64> {
        r.missed.iter().map(|(s, _)| *s).collect()
    }

    #[test]
    fn event_ids_read_back_and_refuse_anything_else() {
        let id = EventId { stream: 3, seq: 14 };
        assert_eq!(id.to_string(), "3-14");
        assert_eq!(EventId::parse("3-14"), Some(id));
        assert_eq!(EventId::parse(" 0-0 "), Some(EventId { stream: 0, seq: 0 }));
        for bad in [
            "",
            "3",
            "3-",
            "-1",
            "a-1",
            "1-b",
            "1-2-3",
            "+1-2",
            "99999999999999999999-1",
        ] {
            assert_eq!(EventId::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_post_stream_replays_what_came_after_the_id_and_follows_until_it_ends() {
        let mut r = Replay::default();
        let s = r.new_stream();
        assert_eq!(s, 1);
        assert_eq!(r.record(s, "a").to_string(), "1-1");
        assert_eq!(r.record(s, "b").to_string(), "1-2");
        let resumed = r.resume(EventId { stream: s, seq: 1 }).unwrap();
        assert_eq!(seqs(&resumed), [2]);
        let follow = resumed.follow.expect("the stream is open");
        r.record(s, "c");
        assert_eq!(follow.try_recv().unwrap(), (3, "c".to_owned()));
        r.close(s);
        assert!(follow.recv().is_err(), "the follower ends with the stream");
        // From the priming event (seq 0): everything; a finished stream is not followed.
        let all = r.resume(EventId { stream: s, seq: 0 }).unwrap();
        assert_eq!(seqs(&all), [1, 2, 3]);
        assert!(all.follow.is_none());
        let none = r.resume(EventId { stream: s, seq: 3 }).unwrap();
        assert!(none.missed.is_empty());
    }

    #[test]
    fn ids_of_no_event_are_unknown() {
        let mut r = Replay::default();
        let s = r.new_stream();
        r.record(s, "a");
        assert_eq!(
            r.resume(EventId { stream: s, seq: 2 }).err(),
            Some(ResumeError::Unknown)
        );
        assert_eq!(
            r.resume(EventId { stream: 9, seq: 0 }).err(),
            Some(ResumeError::Unknown)
        );
        assert_eq!(
            r.resume(EventId {
                stream: STANDALONE,
                seq: 0
            })
            .err(),
            Some(ResumeError::Unknown),
            "no GET stream was opened"
        );
    }

    #[test]
    fn past_the_buffer_the_stream_is_forgotten_not_replayed_with_a_gap() {
        let mut r = Replay::with_limits(3, 2, 1 << 20);
        let s = r.new_stream();
        for t in ["1", "2", "3", "4", "5"] {
            r.record(s, t);
        }
        // Kept: 3, 4, 5. After 2 is whole; after 1 would miss 2.
        assert_eq!(
            seqs(&r.resume(EventId { stream: s, seq: 2 }).unwrap()),
            [3, 4, 5]
        );
        assert_eq!(
            r.resume(EventId { stream: s, seq: 1 }).err(),
            Some(ResumeError::Forgotten)
        );
        // Beyond two streams the oldest finished one is forgotten.
        r.close(s);
        let t = r.new_stream();
        let u = r.new_stream();
        assert_eq!(
            r.resume(EventId { stream: s, seq: 5 }).err(),
            Some(ResumeError::Forgotten)
        );
        assert!(r.resume(EventId { stream: t, seq: 0 }).is_ok());
        assert!(r.resume(EventId { stream: u, seq: 0 }).is_ok());
    }

    #[test]
    fn the_byte_budget_forgets_the_oldest_messages_first() {
        let mut r = Replay::with_limits(100, 10, 10);
        let a = r.new_stream();
        r.record(a, "aaaa");
        r.record(a, "aaaa");
        r.close(a);
        let b = r.new_stream();
        r.record(b, "bbbb");
        // 12 bytes: the oldest of the finished stream goes.
        assert_eq!(
            r.resume(EventId { stream: a, seq: 0 }).err(),
            Some(ResumeError::Forgotten)
        );
        assert_eq!(seqs(&r.resume(EventId { stream: a, seq: 1 }).unwrap()), [2]);
        assert_eq!(seqs(&r.resume(EventId { stream: b, seq: 0 }).unwrap()), [1]);
        assert!(r.bytes <= 10);
    }

    #[test]
    fn the_get_stream_keeps_its_messages_across_connections() {
        let mut r = Replay::default();
        assert!(!r.has_standalone());
        assert_eq!(r.open_standalone().to_string(), "0-0");
        r.record(STANDALONE, "x");
        r.record(STANDALONE, "y");
        assert_eq!(r.open_standalone().to_string(), "0-2");
        let resumed = r
            .resume(EventId {
                stream: STANDALONE,
                seq: 1,
            })
            .unwrap();
        assert_eq!(seqs(&resumed), [2]);
        assert!(
            resumed.follow.is_none(),
            "the GET stream re-attaches instead"
        );
        // POST streams never push the GET stream's log out.
        let mut r = Replay::with_limits(10, 2, 1 << 20);
        r.open_standalone();
        for _ in 0..5 {
            r.new_stream();
        }
        assert!(r.has_standalone());
    }

    #[test]
    fn a_slow_follower_is_let_go() {
        let mut r = Replay::with_limits(2, 4, 1 << 20);
        let s = r.new_stream();
        let follow = r
            .resume(EventId { stream: s, seq: 0 })
            .unwrap()
            .follow
            .unwrap();
        for t in ["1", "2", "3"] {
            r.record(s, t);
        }
        assert_eq!(follow.try_recv().unwrap().0, 1);
        assert_eq!(follow.try_recv().unwrap().0, 2);
        assert!(follow.try_recv().is_err(), "let go when its queue was full");
    }
}
