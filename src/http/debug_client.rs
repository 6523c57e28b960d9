//! `GET /api/debug-client.js`: the browser debug client (protocol doc §2.12), an ES module
//! compiled into the binary and served with this server's URL filled in, taken from the
//! request's `Host` (which has already been checked against the bind). It is
//! answered before routing, like the event stream; its row in the route table gives it its
//! access rule (every origin: a module imported by another site is fetched in CORS mode).
//! Its type is `application/javascript`, as the original serves it (its endpoint test reads it).

use super::Reply;

/// The route's path.
pub(super) const PATH: &str = "/api/debug-client.js";

/// The client's source (`debug_client.js` beside this file).
const SOURCE: &str = include_str!("debug_client.js");

/// The string literal in `SOURCE` that is replaced by the server's URL.
const URL_SLOT: &str = "\"__CIDELDILL_SERVER_URL__\"";

/// The served script. Without a usable `Host` the slot stays as it is, and the script falls
/// back to the origin it was loaded from.
pub(super) fn reply(host: Option<&str>) -> Reply {
    let body = match host.map(str::trim).filter(|h| plausible_host(h)) {
        Some(h) => {
            let url = serde_json::Value::String(format!("http://{h}")).to_string();
            SOURCE.replacen(URL_SLOT, &url, 1)
        }
        None => SOURCE.to_owned(),
    };
    Reply {
        status: 200,
        content_type: "application/javascript; charset=utf-8",
        body: body.into_bytes(),
        headers: vec![
            ("Access-Control-Allow-Origin".to_owned(), "*".to_owned()),
            ("Cache-Control".to_owned(), "no-cache".to_owned()),
            ("X-Content-Type-Options".to_owned(), "nosniff".to_owned()),
        ],
    }
}

/// A `host[:port]` or `[v6]:port` made of the characters such names have (a server bound to
/// a non-loopback address answers any `Host`; nothing else is reflected into the script).
fn plausible_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 255
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.:[]_".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(host: Option<&str>) -> String {
        String::from_utf8(reply(host).body).unwrap()
    }

    #[test]
    fn the_host_is_baked_in_once() {
        assert_eq!(SOURCE.matches(URL_SLOT).count(), 1);
        let js = text(Some("127.0.0.1:5174"));
        assert!(js.contains("const SERVER_URL = \"http://127.0.0.1:5174\";"));
        assert!(!js.contains(URL_SLOT));
        let js = text(Some("[::1]:8000"));
        assert!(js.contains("\"http://[::1]:8000\""));
    }

    #[test]
    fn odd_hosts_are_not_reflected() {
        for host in [
            None,
            Some(""),
            Some("a\"b"),
            Some("x</script>"),
            Some("a b"),
        ] {
            assert!(text(host).contains(URL_SLOT), "{host:?}");
        }
    }

    #[test]
    fn it_is_a_cross_origin_module() {
        let r = reply(Some("localhost:1"));
        assert_eq!(r.content_type, "application/javascript; charset=utf-8");
        let header = |name: &str| {
            r.headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(header("Access-Control-Allow-Origin"), Some("*"));
        assert_eq!(header("Cache-Control"), Some("no-cache"));
    }
}
