//! The timing of upstream MCP connections: connect timeout, pings, reconnection backoff and the
//! grace before a child is killed. The defaults are the design's; tests and flags shorten them.

use std::time::Duration;

use crate::limits::UPSTREAM_CONNECT_TIMEOUT;

/// The timing constants. The defaults are the design's; tests shorten them.
#[derive(Clone, Debug)]
pub struct Timing {
    /// Spawn or HTTP handshake plus `initialize` plus the first `tools/list`.
    pub connect_timeout: Duration,
    /// How often a connected server is pinged.
    pub ping_interval: Duration,
    /// How long a ping may take before the connection counts as lost.
    pub ping_timeout: Duration,
    /// Delays before each automatic reconnection attempt; its length is the attempt limit.
    pub backoff: Vec<Duration>,
    /// Between closing a child's stdin, SIGTERM and SIGKILL.
    pub kill_grace: Duration,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            connect_timeout: UPSTREAM_CONNECT_TIMEOUT,
            ping_interval: Duration::from_secs(15),
            ping_timeout: Duration::from_secs(10),
            backoff: [1, 2, 4, 8, 16].map(Duration::from_secs).to_vec(),
            kill_grace: Duration::from_secs(2),
        }
    }
}

impl Timing {
    /// The defaults with the backoff schedule scaled so its first delay is `base`
    /// (1, 2, 4, 8, 16 × base).
    pub fn with_backoff_base(mut self, base: Duration) -> Timing {
        self.backoff = [1u32, 2, 4, 8, 16].map(|k| base * k).to_vec();
        self
    }
}
