//! Repository rules as tests: module docs, long files split or explained, one stdout writer, no
//! skipped tests, the README's REST reference, tool reference and limits table generated from the
//! tables in the code, every dependency justified, MCP handlers going through `service`, no
//! citation of outside documents, and ARCHITECTURE.md short, naming every source file and only
//! paths that exist.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn sources(sub: &str) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    rust_files(&root().join(sub), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| (p.clone(), std::fs::read_to_string(&p).unwrap()))
        .collect()
}

#[test]
fn every_source_file_starts_with_a_module_doc() {
    for (path, text) in sources("src").into_iter().chain(sources("tests")) {
        assert!(
            text.starts_with("//!"),
            "{} must start with a //! doc comment",
            path.display()
        );
    }
}

/// Lines a source file may have before it must be split or say why it stays whole.
const LONG_FILE_LINES: usize = 1_500;

#[test]
fn long_source_files_are_split_or_say_why_they_stay_whole() {
    // A file doing several jobs is split along its seams: `x.rs` keeps its place and its parts
    // (and its unit tests, `x/tests.rs`) go in the folder `x/` beside it. A file that stays
    // longer says why in its module doc, in a line starting `//! Long file:`.
    let mut long = Vec::new();
    for (path, text) in sources("src").into_iter().chain(sources("benches")) {
        let lines = text.lines().count();
        let says_why = text
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .any(|l| l.starts_with("//! Long file:"));
        if lines > LONG_FILE_LINES && !says_why {
            long.push(format!("{} ({lines} lines)", path.display()));
        }
    }
    assert!(
        long.is_empty(),
        "over {LONG_FILE_LINES} lines without a `//! Long file:` reason in the module doc: {long:?}"
    );
}

#[test]
fn nothing_in_src_writes_to_stdout() {
    // Stdout is reserved for the MCP stdio transport; logs and the banner go to stderr. The one
    // exception: `--help` and `--version` print to stdout, from `main.rs`, through one function.
    for (path, text) in sources("src") {
        for needle in ["println!", "print!(", "dbg!("] {
            assert!(!text.contains(needle), "{} uses {needle}", path.display());
        }
        if path.ends_with("src/main.rs") {
            assert_eq!(
                text.matches("stdout()").count(),
                1,
                "src/main.rs writes stdout only in help_or_version_to_stdout"
            );
            let writer = text
                .find("fn help_or_version_to_stdout(")
                .expect("src/main.rs has help_or_version_to_stdout");
            let body_end = text[writer..]
                .find("\n}\n")
                .map_or(text.len(), |e| writer + e);
            assert!(
                (writer..body_end).contains(&text.find("stdout()").unwrap()),
                "src/main.rs writes stdout outside help_or_version_to_stdout"
            );
            // Its definition and two callers: the version and the grouped help.
            assert_eq!(text.matches("help_or_version_to_stdout(").count(), 3);
            assert!(text.contains("grouped_help()") && text.contains("CARGO_PKG_VERSION"));
        } else if !path.ends_with("src/mcp/stdio.rs") && !path.ends_with("src/mcp/bridge.rs") {
            assert!(
                !text.contains("stdout()"),
                "{} writes stdout; only src/mcp/stdio.rs and src/mcp/bridge.rs may (and \
                 src/main.rs for --help and --version)",
                path.display()
            );
        }
        assert!(
            !text.contains("num_connections("),
            "{}: tiny_http's num_connections() panics",
            path.display()
        );
    }
}

#[test]
fn unsafe_code_lives_only_in_the_counting_allocator_and_the_signal_module() {
    let needle = ["unsafe", " "].concat();
    for (path, text) in sources("src").into_iter().chain(sources("tests")) {
        if path.ends_with("tests/support/src/alloc.rs")
            || path.ends_with("tests/it/tidy.rs")
            || path.ends_with("src/sys.rs")
        {
            continue;
        }
        assert!(
            !text.contains(&needle),
            "{} uses unsafe code",
            path.display()
        );
    }
}

#[test]
fn no_test_is_skipped_and_no_whitespace_trails() {
    let ignore = ["#[", "ignore]"].concat();
    let should_panic = ["#[", "should_panic"].concat();
    for (path, text) in sources("src").into_iter().chain(sources("tests")) {
        assert!(!text.contains(&ignore), "{} skips a test", path.display());
        assert!(
            !text.contains(&should_panic),
            "{} uses should_panic",
            path.display()
        );
        for (i, line) in text.lines().enumerate() {
            assert!(
                !line.ends_with(' ') && !line.ends_with('\t'),
                "{}:{} has trailing whitespace",
                path.display(),
                i + 1
            );
        }
    }
}

#[test]
fn mcp_tools_resources_and_prompts_reach_state_only_through_service() {
    // One service for every face: the MCP handlers never lock the state nor read the store.
    for file in [
        "src/mcp/tools.rs",
        "src/mcp/resources.rs",
        "src/mcp/prompts.rs",
    ] {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        for (i, line) in text.lines().enumerate() {
            assert!(
                !line.contains("lock()") && !line.contains(".store."),
                "{file}:{}: call a `service` function instead of locking the state or reading the store: {line}",
                i + 1
            );
        }
    }
}

fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let a = text
        .find(start)
        .unwrap_or_else(|| panic!("the document lacks {start}"))
        + start.len();
    let b = text[a..]
        .find(end)
        .unwrap_or_else(|| panic!("the document lacks {end}"))
        + a;
    text[a..b].trim()
}

#[test]
fn docs_rest_reference_matches_the_route_table() {
    let readme = std::fs::read_to_string(root().join("docs/rest.md")).unwrap();
    let section = between(
        &readme,
        "<!-- rest-reference:start -->",
        "<!-- rest-reference:end -->",
    );
    let expected = cideldill_server::http::reference_markdown();
    assert_eq!(
        section,
        expected.trim(),
        "docs/rest.md's REST reference is out of date; replace the block between the markers with:\n{expected}"
    );
}

#[test]
fn docs_tool_reference_matches_the_tool_table() {
    let readme = std::fs::read_to_string(root().join("docs/mcp.md")).unwrap();
    let section = between(
        &readme,
        "<!-- mcp-tools:start -->",
        "<!-- mcp-tools:end -->",
    );
    let expected = cideldill_server::mcp::tools::reference_markdown();
    assert_eq!(
        section,
        expected.trim(),
        "docs/mcp.md's MCP tool reference is out of date; replace the block between the markers with:\n{expected}"
    );
}

#[test]
fn docs_limits_table_matches_the_limits_table() {
    let readme = std::fs::read_to_string(root().join("docs/limits.md")).unwrap();
    let section = between(&readme, "<!-- limits:start -->", "<!-- limits:end -->");
    let expected = cideldill_server::limits::reference_markdown();
    assert_eq!(
        section,
        expected.trim(),
        "docs/limits.md's limits table is out of date; replace the block between the markers with:\n{expected}"
    );
}

#[test]
fn the_readme_stays_short_and_links_every_document() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(
        readme.len() <= 40 * 1024,
        "README.md is {} bytes: keep it to what a newcomer needs first, reference goes in docs/",
        readme.len()
    );
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(
            readme.contains(&format!("](docs/{name})")),
            "README.md does not link docs/{name}"
        );
    }
}

#[test]
fn every_dependency_is_justified_in_architecture_md() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let arch = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let mut in_deps = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]" || line == "[dev-dependencies]";
            continue;
        }
        if !in_deps || line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name = line.split(['=', ' ']).next().unwrap();
        // A crate of this repository (the test support crate) is described by its own module
        // doc; only what comes from a registry needs a justification.
        if line.contains("path = \"") && !line.contains("version") {
            let path = line
                .split("path = \"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap();
            let inside = !path.starts_with('/') && !path.split('/').any(|part| part == "..");
            assert!(
                inside && root().join(path).join("Cargo.toml").is_file(),
                "dependency `{name}` names a path outside this repository: {path}"
            );
            continue;
        }
        assert!(
            arch.contains(&format!("`{name}`")),
            "ARCHITECTURE.md does not justify dependency `{name}`"
        );
    }
}

#[test]
fn docs_document_every_flag() {
    let readme = std::fs::read_to_string(root().join("docs/flags.md")).unwrap();
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_cideldill-server"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let flags: Vec<&str> = help
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("--") && w.len() > 2 && *w != "--help" && *w != "--version")
        .collect();
    assert!(
        flags.len() >= 10,
        "could not read the flags from --help: {help}"
    );
    for flag in flags {
        assert!(
            readme.contains(&format!("`{flag}")),
            "docs/flags.md does not mention {flag}"
        );
    }
}

#[test]
fn docs_flags_have_the_groups_of_help() {
    // docs/flags.md: one `## <group>` table per group of `--help`, in the same order, each
    // listing exactly the flags of its group.
    let section = std::fs::read_to_string(root().join("docs/flags.md")).unwrap();
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for line in section.lines() {
        if let Some(title) = line.strip_prefix("## ") {
            groups.push((title.to_owned(), Vec::new()));
        } else if let Some(row) = line.strip_prefix("| `--") {
            let flag = format!("--{}", row.split(['`', ' ']).next().unwrap());
            groups
                .last_mut()
                .unwrap_or_else(|| panic!("{flag} is listed before the first ## group"))
                .1
                .push(flag);
        }
    }
    let expected: Vec<(String, Vec<String>)> = cideldill_server::config::FLAGS
        .iter()
        .map(|group| {
            (
                group.title.to_string(),
                group.flags.iter().map(|f| f.name.to_string()).collect(),
            )
        })
        .collect();
    assert_eq!(
        groups, expected,
        "docs/flags.md must have the groups of config::FLAGS, in order"
    );
}

#[test]
fn docs_flags_tables_match_the_flag_table() {
    let doc = std::fs::read_to_string(root().join("docs/flags.md")).unwrap();
    let section = between(&doc, "<!-- flags:start -->", "<!-- flags:end -->");
    let expected = cideldill_server::config::flags_markdown();
    assert_eq!(
        section,
        expected.trim(),
        "docs/flags.md's flag tables are out of date; replace the block between the markers with:\n{}\n(end of block)",
        expected.trim()
    );
}

#[test]
fn module_layers_point_one_way() {
    // Each rule: files under a path must not name these modules (a dependency the other way
    // would make a cycle, or tie plain data to a heavy module).
    let rules: &[(&str, &[&str])] = &[
        // The MCP client manager knows nothing of the server that uses it.
        (
            "src/upstream",
            &[
                "crate::state",
                "crate::service",
                "crate::mcp",
                "crate::http",
                "crate::config",
                "crate::app",
            ],
        ),
        // Configuration is plain data.
        (
            "src/config.rs",
            &["upstream::manager", "crate::state", "crate::service"],
        ),
        // The `external_*` tools do not know the tool table that lists them.
        ("src/mcp/external.rs", &["tools::", "super::tools"]),
        // The OpenAPI writer is given endpoints; it does not read the route table.
        ("src/http/openapi.rs", &["routes"]),
        // Rendering is pure: bytes in, values out.
        ("src/pretty.rs", &["Store", "crate::state"]),
        // The web UI renders what the service answers; the HTTP face serves it, not the reverse.
        ("src/ui", &["crate::http", "crate::mcp"]),
        // The domain stores and the service never reach into a face.
        ("src/service", &["crate::http", "crate::mcp"]),
        (
            "src/state.rs",
            &["crate::service", "crate::http", "crate::mcp"],
        ),
    ];
    for (place, banned) in rules {
        let files = if place.ends_with(".rs") {
            let p = root().join(place);
            vec![(p.clone(), std::fs::read_to_string(&p).unwrap())]
        } else {
            sources(place)
        };
        assert!(!files.is_empty(), "{place}: no files");
        for (path, text) in files {
            for (i, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                for b in *banned {
                    assert!(
                        !code.contains(b),
                        "{}:{}: names {b}, against the layering in ARCHITECTURE.md: {line}",
                        path.display(),
                        i + 1
                    );
                }
            }
        }
    }
}

#[test]
fn the_pure_parts_name_only_pure_modules() {
    // The pickle reader and the condition language take bytes or values in and give values
    // out: they may name only each other, the limits table and the pickle writer (no state,
    // store, service or face). An allow-list, so a new dependency is a decision made here.
    let rules: &[(&str, &[&str])] = &[
        ("src/pickle", &["pickle", "limits", "pickle_write"]),
        (
            "src/condition",
            &["condition", "pickle", "limits", "pickle_write"],
        ),
    ];
    for (place, allowed) in rules {
        let mut files = sources(place);
        files.push({
            let p = root().join(format!("{place}.rs"));
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            (p, text)
        });
        assert!(files.len() > 1, "{place}: no files");
        for (path, text) in files {
            for (i, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                for (at, _) in code.match_indices("crate::") {
                    let name: String = code[at + 7..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    assert!(
                        allowed.contains(&name.as_str()),
                        "{}:{}: names crate::{name}, outside what a pure part may use: {line}",
                        path.display(),
                        i + 1
                    );
                }
            }
        }
    }
}

/// Every UTF-8 file under `dir`, recursively (binary fixtures are skipped).
fn text_files(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            text_files(&path, out);
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            out.push((path, text));
        }
    }
}

/// Whether `line` has the word `seed` or `seeds` (capitalised or not), a space and a digit: a
/// numbered test of a document that is not in the repository.
fn names_a_numbered_seed(line: &str) -> bool {
    ["seed", "Seed"].iter().any(|word| {
        line.match_indices(word).any(|(i, _)| {
            let starts_word = !line[..i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_');
            let rest = &line[i + word.len()..];
            let rest = rest.strip_prefix('s').unwrap_or(rest);
            starts_word
                && rest
                    .strip_prefix(' ')
                    .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        })
    })
}

#[test]
fn code_and_docs_cite_no_outside_document() {
    // The code and the docs speak of the project itself: what a comment relies on is said in
    // its own words or lives in the repository (ARCHITECTURE.md, docs/protocol.md).
    // The needles are built from parts so this file does not match itself.
    let needles = [["mcp", "-notes"].concat(), ["seed", " 000"].concat()];
    assert!(names_a_numbered_seed(&["Seeds", " 13, 14"].concat()));
    assert!(!names_a_numbered_seed(
        "RELIABILITY_SEED 5, a seeded 3, the seed is printed"
    ));
    let mut files = Vec::new();
    for dir in ["src", "tests", "scripts", "benches", "docs"] {
        text_files(&root().join(dir), &mut files);
    }
    for entry in std::fs::read_dir(root()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push((path.clone(), std::fs::read_to_string(&path).unwrap()));
        }
    }
    assert!(files.len() > 100, "found only {} files", files.len());
    for (path, text) in files {
        for (i, line) in text.lines().enumerate() {
            let lower = line.to_lowercase();
            assert!(
                !needles.iter().any(|n| lower.contains(n.as_str())) && !names_a_numbered_seed(line),
                "{}:{}: cites a document that is not in the repository; say the fact instead: {line}",
                path.display(),
                i + 1
            );
        }
    }
}

/// The format strings of `html!` and `markup!` (which escape their arguments) in `src/ui`.
fn ui_format_strings() -> Vec<(String, String)> {
    let mut found = Vec::new();
    let dir = root().join("src/ui");
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "rs") || path.ends_with("markup.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for mac in ["html!(", "markup!("] {
            let mut rest = text.as_str();
            while let Some(at) = rest.find(mac) {
                rest = &rest[at + mac.len()..];
                let Some(open) = rest.find('"') else { break };
                let bytes = rest.as_bytes();
                let mut end = open + 1;
                while end < bytes.len() && bytes[end] != b'"' {
                    end += if bytes[end] == b'\\' { 2 } else { 1 };
                }
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                found.push((name, rest[open + 1..end.min(bytes.len())].to_owned()));
            }
        }
    }
    found
}

#[test]
fn ui_format_strings_take_no_inline_arguments() {
    // `{name}` in a format string is captured as it is, past the escaping of `html!`.
    let strings = ui_format_strings();
    assert!(
        strings.len() > 200,
        "found only {} html!/markup! uses",
        strings.len()
    );
    for (file, s) in strings {
        let plain = s.replace("{{", "");
        let inline = plain
            .match_indices('{')
            .any(|(i, _)| plain[i + 1..].starts_with(|c: char| c.is_alphabetic() || c == '_'));
        assert!(!inline, "src/ui/{file}: an inline argument in {s:?}");
    }
}

/// The event names the web UI's scripts listen for are the server's (`events::EVENT_NAMES`),
/// and `resync`, which the event stream sends when a client fell behind.
#[test]
fn the_web_uis_scripts_listen_for_every_event_the_server_sends() {
    let mut want: Vec<String> = cideldill_server::events::EVENT_NAMES
        .iter()
        .map(|n| (*n).to_owned())
        .collect();
    want.push("resync".to_owned());
    want.sort();
    for script in ["src/ui/assets/app.js", "src/ui/assets/events-worker.js"] {
        let text = std::fs::read_to_string(root().join(script)).unwrap();
        let list = between(&text, "const EVENTS = [", "];");
        let mut got: Vec<String> = list
            .split(',')
            .map(|n| n.trim().trim_matches('"').to_owned())
            .filter(|n| !n.is_empty())
            .collect();
        got.sort();
        assert_eq!(got, want, "{script}: its EVENTS list");
    }
}

/// The event stream's documentation names every event: its route's summary (docs/rest.md's
/// table) and docs/rest.md's paragraph on watching the session.
#[test]
fn the_event_streams_docs_name_every_event() {
    let route = cideldill_server::http::ROUTES
        .iter()
        .find(|r| r.path == "/api/events")
        .expect("the event stream's route");
    let rest = std::fs::read_to_string(root().join("docs/rest.md")).unwrap();
    let watch = rest
        .lines()
        .find(|l| l.starts_with("Watch the session live"))
        .expect("docs/rest.md's paragraph on /api/events");
    for name in cideldill_server::events::EVENT_NAMES {
        assert!(
            route.summary.contains(name),
            "the /api/events summary lacks {name}"
        );
        assert!(
            watch.contains(&format!("`{name}`")),
            "docs/rest.md's paragraph on /api/events lacks `{name}`"
        );
    }
}

/// Every file under `dir`, recursively, as paths relative to the repository root with `/`;
/// not what tools leave beside the sources (hidden files, Python's `__pycache__`, `node_modules`).
fn all_files(dir: &str, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(root().join(dir)).unwrap() {
        let entry = entry.unwrap();
        let file_name = entry.file_name().to_string_lossy().into_owned();
        if file_name.starts_with('.') || file_name == "__pycache__" || file_name == "node_modules" {
            continue;
        }
        let name = format!("{dir}/{file_name}");
        if entry.file_type().unwrap().is_dir() {
            all_files(&name, out);
        } else {
            out.push(name);
        }
    }
}

/// The paths a markdown document names: its `code spans` and link targets (without a
/// `#fragment`) that start with one of the repository's folders.
fn named_paths(text: &str) -> Vec<String> {
    let spans = text.split('`').skip(1).step_by(2).map(str::to_owned);
    let links = text.split("](").skip(1).filter_map(|rest| {
        let target = rest.split(')').next()?;
        Some(target.split('#').next().unwrap_or("").to_owned())
    });
    let folders = ["src/", "tests/", "benches/", "scripts/", "docs/", "vendor/"];
    spans
        .chain(links)
        .filter(|p| folders.iter().any(|f| p.starts_with(f)))
        .collect()
}

/// Whether `path` matches `pattern`, which has at most one `*` (standing for any text without `/`).
fn matches_glob(pattern: &str, path: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == path,
        Some((head, tail)) => {
            path.len() >= head.len() + tail.len()
                && path.starts_with(head)
                && path.ends_with(tail)
                && !path[head.len()..path.len() - tail.len()].contains('/')
        }
    }
}

#[test]
fn architecture_md_is_short_and_names_every_source_file() {
    // The map a newcomer reads first: short enough to read (a reference belongs in docs/), no
    // line too long to read in an editor, every source file named by its path or by its
    // folder's (the file's parent folder followed by `/`, a folder below the top one), and
    // every path it names present, so that it cannot rot.
    let arch = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    assert!(
        arch.len() < 40 * 1024,
        "ARCHITECTURE.md is {} bytes: keep it under 40 KiB (say what is unlikely to change; \
         reference goes in docs/)",
        arch.len()
    );
    for (i, line) in arch.lines().enumerate() {
        assert!(
            line.chars().count() <= 300,
            "ARCHITECTURE.md:{}: a line of {} characters; break it (at most 300)",
            i + 1,
            line.chars().count()
        );
    }
    let named = named_paths(&arch);
    let mut files = Vec::new();
    for dir in ["src", "tests", "benches", "scripts"] {
        all_files(dir, &mut files);
    }
    assert!(files.len() > 150, "found only {} files", files.len());
    for path in &named {
        let found = if path.contains('*') {
            files.iter().any(|f| matches_glob(path, f))
        } else {
            root().join(path.trim_end_matches('/')).exists()
        };
        assert!(
            found,
            "ARCHITECTURE.md names `{path}`, which does not exist"
        );
    }
    let tops = ["src", "tests", "benches", "scripts"];
    for file in &files {
        let parent = file.rsplit_once('/').map_or("", |(p, _)| p);
        let by_folder = !tops.contains(&parent) && named.iter().any(|n| *n == format!("{parent}/"));
        assert!(
            by_folder || named.iter().any(|n| n == file),
            "ARCHITECTURE.md names neither `{file}` nor its folder `{parent}/`: add it to the code map"
        );
    }
}

#[test]
fn the_architecture_paths_rule_reads_spans_links_and_globs() {
    let text = "see `src/a.rs` and [b](docs/b.md#x), not `Shared` nor [c](https://c)";
    assert_eq!(named_paths(text), ["src/a.rs", "docs/b.md"]);
    assert!(matches_glob("tests/it/mcp_*.rs", "tests/it/mcp_http.rs"));
    assert!(!matches_glob("tests/it/mcp_*.rs", "tests/it/sub/mcp_x.rs"));
    assert!(!matches_glob("tests/it/mcp_*.rs", "tests/it/mcp.rs"));
}
