//! Names of upstream servers and their tools: server-name validation, glob filters for
//! `allowed_tools` / `denied_tools`, and the catalog resolver that turns `server/tool` or a bare
//! `tool` into a (server, tool) pair.
//!
//! Rules:
//! - A server name matches `^[A-Za-z0-9_-]+$` and does not contain `__` (the separator of
//!   re-exposed tool names). So it never contains `/` or `:`.
//! - The catalog name of a tool is `server/tool`; it is a display form and an argument value,
//!   never an MCP tool name.
//! - A bare `tool` resolves only when exactly one server offers it; otherwise the error lists
//!   the candidates. Resolution goes through lookup tables, never by trusting a split alone, so
//!   an upstream tool whose own name contains `/` is still found.
//! - Deny wins over allow; an empty allow list allows everything.
//! - An external server's tool name is 1 to [`UPSTREAM_TOOL_NAME_CHARS`] characters with no
//!   whitespace, control, or invisible/bidirectional formatting character
//!   ([`check_tool_name`]); other tools are skipped when the list is read. This is looser than
//!   the MCP specification's advice (`A-Z a-z 0-9 _ - .`), which servers only SHOULD follow:
//!   names in other scripts (`größe_✓`) and with `/` are real and stay callable, while what
//!   could hide or disguise a name in a log, a listing or an agent's prompt is refused.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::limits::{UPSTREAM_RESOURCE_URI_CHARS, UPSTREAM_TOOL_NAME_CHARS};

/// Why a server name is invalid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NameError {
    /// The name is the empty string.
    Empty,
    /// The name contains a character outside `A-Z a-z 0-9 _ -`.
    BadChar(char),
    /// The name contains `__`, the separator of re-exposed tool names.
    DoubleUnderscore,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::Empty => f.write_str("a server name must not be empty"),
            NameError::BadChar(c) => write!(
                f,
                "a server name may only contain letters, digits, '_' and '-', not {c:?}"
            ),
            NameError::DoubleUnderscore => {
                f.write_str("a server name must not contain \"__\" (the tool-name separator)")
            }
        }
    }
}

impl std::error::Error for NameError {}

/// Checks a server name against `^[A-Za-z0-9_-]+$` without `__`.
pub fn validate_server_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(NameError::BadChar(c));
    }
    if name.contains("__") {
        return Err(NameError::DoubleUnderscore);
    }
    Ok(())
}

/// Why an external server's tool name or resource URI is refused (see the module rules).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExternalNameError {
    /// Not a string, or the empty string.
    Empty,
    /// More than [`UPSTREAM_TOOL_NAME_CHARS`] characters (the count).
    TooLong(usize),
    /// A whitespace, control or invisible formatting character (bidirectional overrides,
    /// zero-width characters).
    BadChar(char),
}

impl fmt::Display for ExternalNameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExternalNameError::Empty => f.write_str("empty or not a string"),
            ExternalNameError::TooLong(n) => write!(f, "{n} characters long (too long)"),
            ExternalNameError::BadChar(c) => write!(
                f,
                "contains U+{:04X} (whitespace, control and invisible formatting characters are \
                 refused)",
                *c as u32
            ),
        }
    }
}

/// Whether `c` is invisible or reorders text: the Unicode format characters (category Cf) an
/// attacker uses to disguise a name (bidirectional embeddings, overrides and isolates,
/// zero-width characters, the soft hyphen, the byte-order mark, Mongolian vowel separator,
/// tag characters, interlinear annotations).
fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{FFA0}' | '\u{FFF0}'..='\u{FFFB}' | '\u{E0000}'..='\u{E0FFF}')
}

/// Checks an external server's tool name (see the module rules).
pub fn check_tool_name(name: &str) -> Result<(), ExternalNameError> {
    check_identifier(name, UPSTREAM_TOOL_NAME_CHARS)
}

/// Checks an external server's resource URI: the rules of tool names, up to
/// [`UPSTREAM_RESOURCE_URI_CHARS`] characters.
pub fn check_resource_uri(uri: &str) -> Result<(), ExternalNameError> {
    check_identifier(uri, UPSTREAM_RESOURCE_URI_CHARS)
}

/// Checks an external server's resource name (shown beside its URI): spaces are fine, control
/// and invisible formatting characters are not.
pub fn check_display_name(name: &str) -> Result<(), ExternalNameError> {
    match name
        .chars()
        .find(|&c| (c.is_whitespace() && c != ' ') || c.is_control() || is_invisible(c))
    {
        Some(c) => Err(ExternalNameError::BadChar(c)),
        None => Ok(()),
    }
}

fn check_identifier(name: &str, max: usize) -> Result<(), ExternalNameError> {
    if name.is_empty() {
        return Err(ExternalNameError::Empty);
    }
    if let Some(c) = name
        .chars()
        .find(|&c| c.is_whitespace() || c.is_control() || is_invisible(c))
    {
        return Err(ExternalNameError::BadChar(c));
    }
    let n = name.chars().count();
    if n > max {
        return Err(ExternalNameError::TooLong(n));
    }
    Ok(())
}

/// The catalog name of a tool: `server/tool`.
pub fn catalog_name(server: &str, tool: &str) -> String {
    format!("{server}/{tool}")
}

/// Whether `name` matches `pattern`, where `*` matches any run of characters (including none)
/// and `?` exactly one character; every other character matches itself. At most
/// O(pattern × name) steps (one backtrack point), so no input can make it slow.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    // Position of the last `*` in the pattern and the name position it was tried at.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(&c) if c == '?' || c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    pi = sp + 1;
                    ni = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Per-server tool filter from `allowed_tools` and `denied_tools` (glob patterns).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolFilter {
    /// If non-empty, only tools matching one of these patterns are exposed.
    pub allowed: Vec<String>,
    /// Tools matching one of these patterns are never exposed, even if allowed.
    pub denied: Vec<String>,
}

impl ToolFilter {
    /// Whether `tool` (the upstream's own name, without the server prefix) may be listed and
    /// called. Deny wins; an empty allow list allows everything.
    pub fn allows(&self, tool: &str) -> bool {
        if self.denied.iter().any(|p| glob_match(p, tool)) {
            return false;
        }
        self.allowed.is_empty() || self.allowed.iter().any(|p| glob_match(p, tool))
    }

    /// Whether the filter lets everything through.
    pub fn is_empty(&self) -> bool {
        self.allowed.is_empty() && self.denied.is_empty()
    }
}

/// Why a tool name did not resolve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResolveError {
    /// The name was empty.
    EmptyName,
    /// `server/tool` named a server the catalog does not know.
    ServerNotFound { server: String },
    /// No server offers the tool (`tool` is the name as asked).
    ToolNotFound { tool: String },
    /// A bare tool name is offered by several servers; `candidates` are their catalog names,
    /// sorted.
    Ambiguous {
        tool: String,
        candidates: Vec<String>,
    },
}

impl ResolveError {
    /// The snake_case error code used in tool results and REST bodies.
    pub fn code(&self) -> &'static str {
        match self {
            ResolveError::EmptyName => "invalid_tool_name",
            ResolveError::ServerNotFound { .. } => "server_not_found",
            ResolveError::ToolNotFound { .. } => "tool_not_found",
            ResolveError::Ambiguous { .. } => "ambiguous_tool",
        }
    }
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolveError::EmptyName => f.write_str("the tool name is empty"),
            ResolveError::ServerNotFound { server } => {
                write!(f, "no upstream server is named {server:?}")
            }
            ResolveError::ToolNotFound { tool } => write!(f, "no upstream tool {tool:?}"),
            ResolveError::Ambiguous { tool, candidates } => write!(
                f,
                "tool {tool:?} is offered by several servers: {}; use the full name",
                candidates.join(", ")
            ),
        }
    }
}

impl std::error::Error for ResolveError {}

/// A (server, tool) pair the catalog resolved to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resolved<'a> {
    pub server: &'a str,
    pub tool: &'a str,
}

/// Lookup tables over the tools of the known servers. Holds only the tools a caller chose to
/// expose (apply [`ToolFilter::allows`] before [`Catalog::add_tool`]), so a filtered-out tool
/// resolves to `tool_not_found` at call time as well as being absent from listings.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    /// server -> its tools.
    servers: BTreeMap<String, BTreeSet<String>>,
    /// bare tool name -> servers offering it.
    by_tool: BTreeMap<String, BTreeSet<String>>,
}

impl Catalog {
    /// An empty catalog.
    pub fn new() -> Catalog {
        Catalog::default()
    }

    /// Records a known server (connected, possibly with no tools).
    pub fn add_server(&mut self, server: &str) {
        self.servers.entry(server.to_owned()).or_default();
    }

    /// Records that `server` offers `tool` (and that the server is known).
    pub fn add_tool(&mut self, server: &str, tool: &str) {
        self.servers
            .entry(server.to_owned())
            .or_default()
            .insert(tool.to_owned());
        self.by_tool
            .entry(tool.to_owned())
            .or_default()
            .insert(server.to_owned());
    }

    /// Builds a catalog from (server, tool) pairs.
    #[cfg(test)]
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Catalog {
        let mut c = Catalog::new();
        for (s, t) in pairs {
            c.add_tool(s, t);
        }
        c
    }

    /// All catalog names (`server/tool`), sorted by server then tool.
    #[cfg(test)]
    pub fn names(&self) -> Vec<String> {
        self.servers
            .iter()
            .flat_map(|(s, tools)| tools.iter().map(move |t| catalog_name(s, t)))
            .collect()
    }

    /// Resolves `server/tool` or a bare `tool`.
    ///
    /// Order: an exact `server/tool` match; then a bare tool name offered by exactly one server
    /// (several → [`ResolveError::Ambiguous`]); then, if the part before the first `/` is a
    /// known server, `tool_not_found`, or if it is not, `server_not_found`; a bare name nobody
    /// offers is `tool_not_found`.
    pub fn resolve(&self, name: &str) -> Result<Resolved<'_>, ResolveError> {
        if name.is_empty() {
            return Err(ResolveError::EmptyName);
        }
        if let Some((server, tool)) = name.split_once('/') {
            if let Some((s, tools)) = self.servers.get_key_value(server) {
                if let Some(t) = tools.get(tool) {
                    return Ok(Resolved { server: s, tool: t });
                }
            }
        }
        if let Some((t, servers)) = self.by_tool.get_key_value(name) {
            let mut it = servers.iter();
            match (it.next(), it.next()) {
                (Some(s), None) => return Ok(Resolved { server: s, tool: t }),
                (Some(_), Some(_)) => {
                    return Err(ResolveError::Ambiguous {
                        tool: name.to_owned(),
                        candidates: servers.iter().map(|s| catalog_name(s, t)).collect(),
                    })
                }
                _ => {}
            }
        }
        match name.split_once('/') {
            Some((server, _)) if !self.servers.contains_key(server) => {
                Err(ResolveError::ServerNotFound {
                    server: server.to_owned(),
                })
            }
            _ => Err(ResolveError::ToolNotFound {
                tool: name.to_owned(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tool_names_refuse_what_hides_or_disguises_them() {
        for ok in [
            "echo",
            "größe_✓",
            "a/b",
            "x.y-z_1",
            &"n".repeat(UPSTREAM_TOOL_NAME_CHARS),
        ] {
            assert_eq!(check_tool_name(ok), Ok(()), "{ok:?}");
        }
        assert_eq!(check_tool_name(""), Err(ExternalNameError::Empty));
        let long = "n".repeat(UPSTREAM_TOOL_NAME_CHARS + 1);
        assert_eq!(
            check_tool_name(&long),
            Err(ExternalNameError::TooLong(UPSTREAM_TOOL_NAME_CHARS + 1))
        );
        for (bad, c) in [
            ("a\nb", '\n'),
            ("a b", ' '),
            ("evil\u{202E}txt.exe", '\u{202E}'),
            ("zero\u{200B}width", '\u{200B}'),
            ("\u{FEFF}bom", '\u{FEFF}'),
            ("tag\u{E0041}", '\u{E0041}'),
            ("nul\0", '\0'),
        ] {
            assert_eq!(
                check_tool_name(bad),
                Err(ExternalNameError::BadChar(c)),
                "{bad:?}"
            );
            assert_eq!(
                check_resource_uri(bad),
                Err(ExternalNameError::BadChar(c)),
                "{bad:?}"
            );
        }
        assert_eq!(check_resource_uri("file:///tmp/a%20b.txt"), Ok(()));
        assert_eq!(check_display_name("A readme file"), Ok(()));
        assert_eq!(
            check_display_name("evil\u{202E}name"),
            Err(ExternalNameError::BadChar('\u{202E}'))
        );
        assert_eq!(
            check_display_name("two\nlines"),
            Err(ExternalNameError::BadChar('\n'))
        );
    }

    use super::*;

    // Letters, digits, `_` and `-` make a valid server name, "breakpoint" included.
    #[test]
    fn valid_server_names() {
        for n in [
            "filesystem",
            "my-server",
            "db_1",
            "A",
            "x-y_z9",
            "breakpoint",
        ] {
            assert_eq!(validate_server_name(n), Ok(()), "{n}");
        }
    }

    // Empty names, other characters (`/`, `:`, space, non-ASCII...) and `__` are refused.
    #[test]
    fn invalid_server_names() {
        assert_eq!(validate_server_name(""), Err(NameError::Empty));
        assert_eq!(validate_server_name("a/b"), Err(NameError::BadChar('/')));
        assert_eq!(validate_server_name("a b"), Err(NameError::BadChar(' ')));
        assert_eq!(validate_server_name("a:b"), Err(NameError::BadChar(':')));
        assert_eq!(validate_server_name("a.b"), Err(NameError::BadChar('.')));
        assert_eq!(validate_server_name("ü"), Err(NameError::BadChar('ü')));
        assert_eq!(
            validate_server_name("my__srv"),
            Err(NameError::DoubleUnderscore)
        );
        assert_eq!(
            NameError::Empty.to_string(),
            "a server name must not be empty"
        );
        assert_eq!(
            NameError::BadChar('/').to_string(),
            "a server name may only contain letters, digits, '_' and '-', not '/'"
        );
        assert_eq!(
            NameError::DoubleUnderscore.to_string(),
            "a server name must not contain \"__\" (the tool-name separator)"
        );
    }

    #[test]
    fn glob_basics() {
        assert!(glob_match("read_file", "read_file"));
        assert!(!glob_match("read_file", "read_files"));
        assert!(glob_match("read_*", "read_file"));
        assert!(glob_match("read_*", "read_"));
        assert!(glob_match("*", ""));
        assert!(glob_match("", ""));
        assert!(!glob_match("", "x"));
        assert!(glob_match("*_file", "write_file"));
        assert!(glob_match("?ead*", "read_file"));
        assert!(!glob_match("?ead*", "ead"));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(glob_match("a*b*c", "abbbc"));
        assert!(!glob_match("a*b*c", "acb"));
        assert!(glob_match("**x", "x"));
        assert!(glob_match("é?", "éü"));
        assert!(!glob_match("Read*", "read"));
    }

    #[test]
    fn glob_is_not_slow_on_hostile_input() {
        let name = "a".repeat(10_000);
        let pattern = format!("{}b", "*a".repeat(50));
        assert!(!glob_match(&pattern, &name));
    }

    #[test]
    fn filter_rules() {
        let all = ToolFilter::default();
        assert!(all.is_empty());
        assert!(all.allows("anything"));

        let deny = ToolFilter {
            allowed: vec![],
            denied: vec!["write_*".into(), "delete_file".into()],
        };
        assert!(deny.allows("read_file"));
        assert!(!deny.allows("write_file"));
        assert!(!deny.allows("delete_file"));

        let allow = ToolFilter {
            allowed: vec!["read_*".into(), "list_directory".into()],
            denied: vec![],
        };
        assert!(allow.allows("read_file"));
        assert!(allow.allows("list_directory"));
        assert!(!allow.allows("write_file"));

        let both = ToolFilter {
            allowed: vec!["*".into()],
            denied: vec!["read_secret".into()],
        };
        assert!(!both.is_empty());
        assert!(both.allows("read_file"));
        assert!(!both.allows("read_secret"), "deny wins over allow");
    }

    fn sample() -> Catalog {
        let mut c = Catalog::from_pairs([
            ("fs", "read_file"),
            ("fs", "search"),
            ("web", "search"),
            ("web", "fetch"),
            ("odd", "dbg/step_over"),
        ]);
        c.add_server("empty");
        c
    }

    // Catalog names are `server/tool`, sorted.
    #[test]
    fn catalog_names_are_namespaced() {
        assert_eq!(catalog_name("fs", "read_file"), "fs/read_file");
        let c = sample();
        assert_eq!(
            c.names(),
            [
                "fs/read_file",
                "fs/search",
                "odd/dbg/step_over",
                "web/fetch",
                "web/search"
            ]
        );
    }

    // Full names and unique bare names resolve; an ambiguous bare name lists the candidates;
    // unknown servers and tools, a server with no tools and the empty name are errors.
    #[test]
    fn resolve_rules() {
        let c = sample();
        let ok = |server, tool| Ok(Resolved { server, tool });
        assert_eq!(c.resolve("fs/read_file"), ok("fs", "read_file"));
        assert_eq!(c.resolve("web/search"), ok("web", "search"));
        assert_eq!(c.resolve("read_file"), ok("fs", "read_file"));
        assert_eq!(c.resolve("fetch"), ok("web", "fetch"));
        assert_eq!(c.resolve("odd/dbg/step_over"), ok("odd", "dbg/step_over"));
        assert_eq!(c.resolve("dbg/step_over"), ok("odd", "dbg/step_over"));

        let amb = c.resolve("search").unwrap_err();
        assert_eq!(
            amb,
            ResolveError::Ambiguous {
                tool: "search".into(),
                candidates: vec!["fs/search".into(), "web/search".into()],
            }
        );
        assert_eq!(amb.code(), "ambiguous_tool");
        assert_eq!(
            amb.to_string(),
            "tool \"search\" is offered by several servers: fs/search, web/search; use the full name"
        );

        let e = c.resolve("nosuch/tool").unwrap_err();
        assert_eq!(
            e,
            ResolveError::ServerNotFound {
                server: "nosuch".into()
            }
        );
        assert_eq!(e.code(), "server_not_found");
        assert_eq!(e.to_string(), "no upstream server is named \"nosuch\"");

        let e = c.resolve("fs/nosuch").unwrap_err();
        assert_eq!(
            e,
            ResolveError::ToolNotFound {
                tool: "fs/nosuch".into()
            }
        );
        assert_eq!(e.code(), "tool_not_found");
        assert_eq!(e.to_string(), "no upstream tool \"fs/nosuch\"");

        assert_eq!(
            c.resolve("nosuch"),
            Err(ResolveError::ToolNotFound {
                tool: "nosuch".into()
            })
        );
        // A known server with no tools.
        assert_eq!(c.resolve("empty/x").unwrap_err().code(), "tool_not_found");
        assert_eq!(c.resolve("fs/").unwrap_err().code(), "tool_not_found");
        assert_eq!(c.resolve("/x").unwrap_err().code(), "server_not_found");

        let e = c.resolve("").unwrap_err();
        assert_eq!(e, ResolveError::EmptyName);
        assert_eq!(e.code(), "invalid_tool_name");
        assert_eq!(e.to_string(), "the tool name is empty");
    }

    // A server named "breakpoint" is just another server.
    #[test]
    fn breakpoint_server_name_is_ordinary() {
        let c = Catalog::from_pairs([("breakpoint", "tool")]);
        assert_eq!(
            c.resolve("breakpoint/tool"),
            Ok(Resolved {
                server: "breakpoint",
                tool: "tool"
            })
        );
        assert_eq!(
            c.resolve("breakpoint_tool").unwrap_err().code(),
            "tool_not_found"
        );
    }

    // Non-ASCII tool names resolve, full and bare.
    #[test]
    fn unicode_tool_names() {
        let c = Catalog::from_pairs([("fs", "lire_fichier_é")]);
        assert_eq!(
            c.resolve("fs/lire_fichier_é").unwrap().tool,
            "lire_fichier_é"
        );
        assert_eq!(c.resolve("lire_fichier_é").unwrap().server, "fs");
    }
}
