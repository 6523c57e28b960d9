//! The trust boundary of the HTTP port: which browser origins may use which endpoints, and
//! which `Host` names a loopback server answers to (DNS-rebinding protection). Pure.
//!
//! A request without `Origin` (the Python client, curl, scripts, MCP hosts) is never refused
//! by origin. A browser request is allowed on the guarded endpoints only from the server's own
//! origin (`http://localhost:<port>`, `http://127.0.0.1:<port>`, `http://[::1]:<port>` for the
//! bound port, and the bound address itself when it is a specific one) or an `--allow-origin`
//! value; other loopback ports and `null` are foreign too. The browser-client endpoints of the
//! route table answer these origins and the ones the user granted in the web UI
//! (`crate::origins`, checked by `http::decide`); with CORS `*` (on their refusals too, so that a
//! page's script can read why), as the original server did for every origin.

use crate::config::is_loopback_host;

/// Who may use the port from a browser, and which `Host` names it answers to.
#[derive(Clone, Debug)]
pub struct Policy {
    /// The origins of this server's own pages, lowercase.
    own: Vec<String>,
    /// `--allow-origin` values, lowercase (`*` allows every origin).
    extra: Vec<String>,
    /// Bound to a loopback address: a request must name a loopback host.
    loopback: bool,
}

impl Policy {
    /// The policy of a server bound to `host:port`.
    pub fn new(host: &str, port: u16, allow_origins: &[String]) -> Policy {
        let mut own: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .iter()
            .map(|h| format!("http://{h}:{port}"))
            .collect();
        let bare = host.trim_matches(|c| c == '[' || c == ']');
        let wildcard = matches!(bare, "0.0.0.0" | "::" | "");
        if !wildcard && !is_loopback_host(bare) {
            let authority = if bare.contains(':') {
                format!("[{bare}]")
            } else {
                bare.to_owned()
            };
            own.push(format!("http://{}:{port}", authority.to_ascii_lowercase()));
        }
        Policy {
            own,
            extra: allow_origins
                .iter()
                .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
                .collect(),
            loopback: is_loopback_host(bare),
        }
    }

    /// Whether a request with this `Origin` header may use a guarded endpoint.
    pub fn origin_allowed(&self, origin: Option<&str>) -> bool {
        let Some(origin) = origin else {
            return true;
        };
        let origin = origin.trim().to_ascii_lowercase();
        self.own.contains(&origin) || self.extra.iter().any(|o| *o == origin || o == "*")
    }

    /// Whether a request naming this `Host` is answered (always, unless bound to loopback).
    pub fn host_allowed(&self, host: Option<&str>) -> bool {
        match host {
            _ if !self.loopback => true,
            // HTTP/1.0 requests may lack a Host header; browsers always send one.
            None => true,
            Some(h) => is_loopback_host(host_part(h.trim())),
        }
    }
}

/// The host of `host[:port]` or `[v6]:port`.
fn host_part(authority: &str) -> &str {
    let authority = authority.split('/').next().unwrap_or(authority);
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    authority
        .rsplit_once(':')
        .map(|(h, _)| h)
        .unwrap_or(authority)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_servers_own_origins_and_allowed_ones_pass() {
        let p = Policy::new("127.0.0.1", 5174, &[]);
        assert!(
            p.origin_allowed(None),
            "no Origin: curl, scripts, the Python client"
        );
        for own in [
            "http://localhost:5174",
            "http://127.0.0.1:5174",
            "http://[::1]:5174",
            "HTTP://LOCALHOST:5174",
        ] {
            assert!(p.origin_allowed(Some(own)), "{own}");
        }
        for foreign in [
            "http://evil.example",
            "http://localhost:5173",
            "http://127.0.0.1",
            "http://localhost:5174.evil.example",
            "https://localhost:5174",
            "null",
            "",
        ] {
            assert!(!p.origin_allowed(Some(foreign)), "{foreign}");
        }
        let p = Policy::new("127.0.0.1", 5174, &["https://app.example/".to_owned()]);
        assert!(p.origin_allowed(Some("https://app.example")));
        assert!(!p.origin_allowed(Some("https://other.example")));
        let p = Policy::new("127.0.0.1", 5174, &["*".to_owned()]);
        assert!(p.origin_allowed(Some("http://evil.example")));
    }

    #[test]
    fn a_specific_bind_address_is_an_own_origin_too() {
        let p = Policy::new("192.168.1.4", 8000, &[]);
        assert!(p.origin_allowed(Some("http://192.168.1.4:8000")));
        assert!(p.origin_allowed(Some("http://localhost:8000")));
        assert!(!p.origin_allowed(Some("http://192.168.1.4:8001")));
        let p = Policy::new("0.0.0.0", 8000, &[]);
        assert!(!p.origin_allowed(Some("http://0.0.0.0:8000")));
        let p = Policy::new("fe80::1", 8000, &[]);
        assert!(p.origin_allowed(Some("http://[fe80::1]:8000")));
    }

    #[test]
    fn a_loopback_server_answers_only_to_loopback_names() {
        let p = Policy::new("127.0.0.1", 5174, &[]);
        assert!(p.host_allowed(Some("localhost:5174")));
        assert!(p.host_allowed(Some("127.0.0.1:1")));
        assert!(p.host_allowed(Some("[::1]:5174")));
        assert!(p.host_allowed(Some("LOCALHOST")));
        assert!(p.host_allowed(None));
        assert!(!p.host_allowed(Some("evil.example:5174")));
        assert!(!p.host_allowed(Some("192.168.1.4:5174")));
        assert!(!p.host_allowed(Some("localhost.evil.example")));
        // A server bound elsewhere is reached by other names.
        let p = Policy::new("0.0.0.0", 5174, &[]);
        assert!(p.host_allowed(Some("my-laptop.lan:5174")));
    }
}
