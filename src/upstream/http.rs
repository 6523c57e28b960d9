//! Placeholder, replaced by the real transport.
use super::peer::Peer;
use std::sync::Arc;
use std::time::Duration;
pub fn connect(
    _peer: &Arc<Peer>,
    _url: &str,
    _headers: &[(String, String)],
    _t: Duration,
) -> Result<(), String> {
    Err("not yet".into())
}
