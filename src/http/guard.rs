//! Origin and Host checks for the MCP HTTP endpoints (MCP 2025-11-25, Streamable HTTP,
//! "Security warning"; DNS-rebinding protection), and the Origin check of the external MCP
//! server endpoints `/api/mcp-*`. Pure.

use crate::config::is_loopback_host;

/// Whether an `Origin` header value is allowed: absent (non-browser clients), a loopback
/// origin, or one of `extra` (exact match, from `--allow-origin`).
pub fn origin_allowed(origin: Option<&str>, extra: &[String]) -> bool {
    let Some(origin) = origin.map(str::trim) else {
        return true;
    };
    if extra.iter().any(|o| o == origin || o == "*") {
        return true;
    }
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    is_loopback_host(host_part(rest))
}

/// Whether a `Host` header names this machine, when the server is bound to loopback.
pub fn host_allowed(host: Option<&str>) -> bool {
    match host {
        // HTTP/1.0 requests may lack a Host header; only browsers matter here and they send one.
        None => true,
        Some(h) => is_loopback_host(host_part(h.trim())),
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
    fn origins() {
        let none: Vec<String> = vec![];
        assert!(origin_allowed(None, &none));
        assert!(origin_allowed(Some("http://localhost:3000"), &none));
        assert!(origin_allowed(Some("http://127.0.0.1"), &none));
        assert!(origin_allowed(Some("http://[::1]:8080"), &none));
        assert!(!origin_allowed(Some("http://evil.example"), &none));
        assert!(!origin_allowed(
            Some("http://localhost.evil.example"),
            &none
        ));
        assert!(!origin_allowed(Some("null"), &none));
        assert!(origin_allowed(
            Some("https://app.example"),
            &["https://app.example".to_owned()]
        ));
    }

    #[test]
    fn hosts() {
        assert!(host_allowed(Some("localhost:5174")));
        assert!(host_allowed(Some("127.0.0.1:1")));
        assert!(host_allowed(Some("[::1]:5174")));
        assert!(host_allowed(None));
        assert!(!host_allowed(Some("evil.example:5174")));
        assert!(!host_allowed(Some("192.168.1.4:5174")));
    }
}
