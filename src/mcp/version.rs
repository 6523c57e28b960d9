//! MCP protocol revisions we speak, negotiation, and the features each revision gates. Pure.
//!
//! Two eras: the legacy revisions (`SUPPORTED`), reached through the `initialize` handshake, and
//! the stateless modern ones (`MODERN`), where every request names its revision in
//! `params._meta` (see `modern.rs`).

/// Supported legacy revisions (with the `initialize` handshake), newest first.
pub const SUPPORTED: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Supported modern revisions (stateless: no handshake, a per-request envelope), newest first.
pub const MODERN: [&str; 1] = ["2026-07-28"];

/// Whether `version` is a modern revision we speak.
pub fn is_modern(version: &str) -> bool {
    MODERN.contains(&version)
}

/// Every revision we speak, modern first, then the legacy ones (newest first): what
/// `server/discover` and an unsupported-version error list.
pub fn all_supported() -> Vec<&'static str> {
    MODERN.iter().chain(SUPPORTED.iter()).copied().collect()
}

/// Our latest revision, the counter-offer for an unknown one.
pub const LATEST: &str = SUPPORTED[0];

/// MCP 2024-11-05, lifecycle: answer the client's version if we support it, else our latest.
pub fn negotiate(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|r| SUPPORTED.iter().copied().find(|s| *s == r))
        .unwrap_or(LATEST)
}

/// Whether `version` is a legacy revision we speak.
pub fn is_supported(version: &str) -> bool {
    SUPPORTED.contains(&version)
}

/// JSON-RPC batches exist only in 2025-03-26.
pub fn has_batches(version: &str) -> bool {
    version == "2025-03-26"
}

/// Structured tool output (`outputSchema`, `structuredContent`) and `title` fields: 2025-06-18+.
pub fn has_structured_output(version: &str) -> bool {
    version >= "2025-06-18"
}

/// Tool annotations and the `completions` capability: 2025-03-26+.
pub fn has_annotations(version: &str) -> bool {
    version >= "2025-03-26"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_echoes_known_versions_and_counters_unknown_ones() {
        for v in SUPPORTED {
            assert_eq!(negotiate(Some(v)), v);
        }
        assert_eq!(negotiate(Some("2099-01-01")), LATEST);
        assert_eq!(negotiate(Some("2026-07-28")), LATEST);
        assert_eq!(negotiate(None), LATEST);
    }

    #[test]
    fn features_follow_revisions() {
        assert!(has_batches("2025-03-26"));
        assert!(!has_batches("2025-06-18") && !has_batches("2024-11-05"));
        assert!(has_structured_output("2025-11-25") && has_structured_output("2025-06-18"));
        assert!(!has_structured_output("2025-03-26"));
        assert!(has_annotations("2025-03-26") && !has_annotations("2024-11-05"));
        // The modern revision has every feature of the newest legacy one, and no batches.
        assert!(has_structured_output(MODERN[0]) && has_annotations(MODERN[0]));
        assert!(!has_batches(MODERN[0]));
    }

    #[test]
    fn eras_are_disjoint_and_listed_modern_first() {
        assert!(is_modern("2026-07-28") && !is_supported("2026-07-28"));
        assert!(SUPPORTED.iter().all(|v| !is_modern(v)));
        let all = all_supported();
        assert_eq!(all[0], "2026-07-28");
        assert_eq!(&all[1..], &SUPPORTED);
    }
}
