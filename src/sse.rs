//! Server-sent events: encoding of events and comments (WHATWG HTML, "server-sent events").
//! Pure; shared by the HTTP transports of the MCP server.

/// One event: an optional `event:` name and `data:` lines (a newline in `data` starts a new
/// `data:` line, which the client joins back with `\n`), ended by a blank line.
pub fn event(name: Option<&str>, data: &str) -> String {
    let mut out = String::with_capacity(data.len() + 32);
    if let Some(n) = name {
        out.push_str("event: ");
        out.push_str(n);
        out.push('\n');
    }
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(line.strip_suffix('\r').unwrap_or(line));
        out.push('\n');
    }
    out.push('\n');
    out
}

/// A comment line, ignored by clients: keeps idle connections alive through proxies.
pub fn comment(text: &str) -> String {
    format!(": {}\n\n", text.replace('\n', " "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_have_a_name_data_lines_and_a_blank_line() {
        assert_eq!(
            event(Some("endpoint"), "/mcp/messages?session_id=ab"),
            "event: endpoint\ndata: /mcp/messages?session_id=ab\n\n"
        );
        assert_eq!(event(None, "{}"), "data: {}\n\n");
        assert_eq!(
            event(Some("message"), "a\nb"),
            "event: message\ndata: a\ndata: b\n\n"
        );
        assert_eq!(comment("ping"), ": ping\n\n");
    }
}
