//! The source views: the call stack of a paused or recorded call with a few lines of source
//! around each frame (`/callstack/<pause_id>`, `/callstack/call/<call_id>`), and the source
//! file of one frame with its line highlighted (`/frame/<pause_id>/<i>`,
//! `/frame/call/<call_id>/<i>`).
//!
//! What may be read: only a file that the call's own stack trace names, chosen by its index in
//! that stack (no URL form takes a path), only if it is a regular file after resolving symbolic
//! links (never a directory, device, FIFO or socket), opened without following a link swapped in
//! meanwhile and without blocking, and only up to `MAX_SOURCE_BYTES` (a larger file gets a
//! notice instead). The bytes are decoded as UTF-8, invalid sequences replaced, and every line
//! is escaped. The original server also served any path through `/frame/source?file=`; that
//! form does not exist here.
//!
//! The stack trace is written by whoever calls the server, not by the server, so it may name
//! any file: only source files are shown. After resolving links, the file must have the
//! extension of a source file ([`SOURCE_EXTENSIONS`]) and hold text (no NUL byte), and it
//! must lie outside `/proc`, `/sys`, `/dev` and `/etc`; with `--source-root` (repeatable) it
//! must lie under one of those directories instead (which may widen the default, as a root
//! under `/etc` does, or narrow it).

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde_json::Value;

use super::highlight::{Highlighter, Lang};
use super::markup::{html, markup};
use super::time;
use super::tree::call_tree_href;
use super::{Answer, Html, View};
use crate::limits::MAX_SOURCE_BYTES;
use crate::service::{self, Payloads, When};
use crate::state::Shared;
use crate::urlenc::encode_segment;
use std::path::PathBuf;

/// Lines shown before and after a frame's line on the call-stack page.
const CONTEXT: usize = 5;

/// One frame of a `call_site.stack_trace` (innermost caller first).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Frame {
    pub filename: String,
    /// 1-based; `None` when the client sent none.
    pub lineno: Option<usize>,
    pub function: String,
    pub code_context: Option<String>,
}

impl Frame {
    /// `file:line`.
    pub fn location(&self) -> String {
        match self.lineno {
            Some(n) => format!("{}:{n}", self.filename),
            None => self.filename.clone(),
        }
    }

    /// The URL fragment of its line on a frame page.
    pub fn anchor(&self) -> String {
        self.lineno.map(|n| format!("#L{n}")).unwrap_or_default()
    }
}

/// Whose code a frame runs when it is not the program's own: the debug client's (its Python
/// package `cideldill_client`, or the browser client's script) or an installed library's or
/// the Python runtime's. The call-stack page folds those frames ("just my code").
pub fn library_frame(f: &Frame) -> Option<&'static str> {
    let name = f.filename.as_str();
    if name.contains("/cideldill_client/") || name.ends_with("/debug-client.js") {
        Some("the debug client")
    } else if name.contains("/site-packages/")
        || name.contains("/dist-packages/")
        || name.starts_with("<frozen ")
        || name.contains("/lib/python3")
    {
        Some("a library")
    } else {
        None
    }
}

/// The frames of a stack trace, one per entry (an entry that is not an object gives an empty
/// frame, so indexes stay those of the stack).
pub fn frames(stack: &Value) -> Vec<Frame> {
    let Some(entries) = stack.as_array() else {
        return Vec::new();
    };
    entries
        .iter()
        .map(|f| Frame {
            filename: text(f.get("filename")),
            lineno: f
                .get("lineno")
                .and_then(Value::as_u64)
                .and_then(|n| usize::try_from(n).ok()),
            function: text(f.get("function")),
            code_context: f
                .get("code_context")
                .filter(|c| !c.is_null())
                .map(|c| text(Some(c))),
        })
        .collect()
}

fn text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// Why a frame's source cannot be shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// Not an absolute path (`<stdin>`, `<frozen ...>`, or relative to the program's own
    /// working directory, which the server does not know).
    NotAPath,
    /// It does not exist or cannot be read.
    Unreadable(String),
    /// A directory, device, FIFO or socket.
    NotRegular,
    /// Larger than `MAX_SOURCE_BYTES`: its size.
    TooLarge(u64),
    /// Not a source file the server shows (its extension, its content or its place).
    NotSource(&'static str),
}

/// The extensions of the files shown (Python and JavaScript/TypeScript sources, for the Python
/// client and the browser debug client).
pub const SOURCE_EXTENSIONS: &[&str] = &[
    "py", "pyw", "pyi", "pyx", "pxd", "js", "mjs", "cjs", "jsx", "ts", "mts", "cts", "tsx",
];

/// The system's own directories, never shown without a `--source-root` under them.
const SYSTEM_DIRS: &[&str] = &["/proc", "/sys", "/dev", "/etc"];

/// Whether the real path `real` may be shown, by its extension and place.
fn allowed(real: &Path, roots: &[PathBuf]) -> Result<(), Unavailable> {
    let ext = real
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    if !ext.is_some_and(|e| SOURCE_EXTENSIONS.contains(&e.as_str())) {
        return Err(Unavailable::NotSource(
            "not a source file (by its extension)",
        ));
    }
    if roots.is_empty() {
        if SYSTEM_DIRS.iter().any(|d| real.starts_with(d)) {
            return Err(Unavailable::NotSource("in a system directory"));
        }
        return Ok(());
    }
    let under = roots
        .iter()
        .filter_map(|r| fs::canonicalize(r).ok())
        .any(|r| real.starts_with(r));
    if under {
        Ok(())
    } else {
        Err(Unavailable::NotSource(
            "outside the --source-root directories",
        ))
    }
}

impl Unavailable {
    pub fn describe(&self) -> String {
        match self {
            Unavailable::NotAPath => "not a file path the server can read".into(),
            Unavailable::Unreadable(why) => format!("cannot be read ({why})"),
            Unavailable::NotRegular => "not a regular file".into(),
            Unavailable::TooLarge(n) => format!(
                "{} bytes, larger than the {} MiB shown",
                n,
                MAX_SOURCE_BYTES / (1024 * 1024)
            ),
            Unavailable::NotSource(why) => (*why).to_owned(),
        }
    }
}

/// Reads a source file named by a stack frame, under the rules of the module documentation.
pub fn read_source(name: &str, roots: &[PathBuf]) -> Result<String, Unavailable> {
    let path = Path::new(name);
    if name.is_empty() || !path.is_absolute() {
        return Err(Unavailable::NotAPath);
    }
    let unreadable = |e: io::Error| Unavailable::Unreadable(e.kind().to_string());
    let real = fs::canonicalize(path).map_err(unreadable)?;
    let meta = fs::metadata(&real).map_err(unreadable)?;
    if !meta.is_file() {
        return Err(Unavailable::NotRegular);
    }
    allowed(&real, roots)?;
    if meta.len() > MAX_SOURCE_BYTES {
        return Err(Unavailable::TooLarge(meta.len()));
    }
    // Whatever was swapped in since: no link is followed, a FIFO does not block the open, and
    // the open file itself must still be a regular file.
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&real)
        .map_err(unreadable)?;
    let meta = file.metadata().map_err(unreadable)?;
    if !meta.is_file() {
        return Err(Unavailable::NotRegular);
    }
    let mut bytes = Vec::with_capacity(meta.len().min(MAX_SOURCE_BYTES) as usize);
    file.take(MAX_SOURCE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > MAX_SOURCE_BYTES {
        return Err(Unavailable::TooLarge(bytes.len() as u64));
    }
    if bytes.contains(&0) {
        return Err(Unavailable::NotSource("not text (it holds NUL bytes)"));
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Lines `from..=to` (1-based, clamped) of `text` with their numbers, `line` highlighted,
/// the code marked by its language (by the file's name). The block scrolls sideways on its
/// own, so it takes the focus (a keyboard scrolls it too).
fn lines_html(
    out: &mut Html,
    filename: &str,
    text: &str,
    from: usize,
    to: usize,
    line: Option<usize>,
) {
    out.push_lit("<pre class=\"src\" tabindex=\"0\"><code>");
    let mut marks = Highlighter::new(Lang::of(filename));
    for (i, l) in text.lines().enumerate() {
        let n = i + 1;
        if n < from {
            marks.skip(l);
            continue;
        }
        if n > to {
            break;
        }
        let hl = if Some(n) == line {
            Html::lit(" hl")
        } else {
            Html::new()
        };
        let mut code = Html::new();
        marks.line(&mut code, l);
        html!(
            out,
            "<span class=\"line{}\" id=\"L{}\"><span class=\"n\">{}</span>{}</span>",
            hl,
            n,
            n,
            code
        );
    }
    out.push_lit("</code></pre>");
}

/// Whose stack a page shows: a current pause, or a recorded call.
enum Owner {
    Pause(String),
    Call(String),
}

impl Owner {
    /// Parses what follows `/callstack/` or `/frame/` (percent-decoded segments).
    fn parse(rest: &str) -> Option<(Owner, Vec<String>)> {
        let mut segments = rest.split('/').map(crate::urlenc::percent_decode);
        let first = segments.next().filter(|s| !s.is_empty())?;
        let owner = if first == "call" {
            Owner::Call(segments.next().filter(|s| !s.is_empty())?)
        } else {
            Owner::Pause(first)
        };
        Some((owner, segments.collect()))
    }

    fn callstack_href(&self) -> String {
        match self {
            Owner::Pause(id) => format!("/callstack/{}", encode_segment(id)),
            Owner::Call(id) => format!("/callstack/call/{}", encode_segment(id)),
        }
    }

    fn frame_href(&self, i: usize, f: &Frame) -> String {
        match self {
            Owner::Pause(id) => format!("/frame/{}/{i}{}", encode_segment(id), f.anchor()),
            Owner::Call(id) => format!("/frame/call/{}/{i}{}", encode_segment(id), f.anchor()),
        }
    }
}

/// What the pages show of the owner: title (text), frames, and the facts and links above them.
struct Stack {
    method: String,
    frames: Vec<Frame>,
    meta: Html,
    nav: &'static str,
}

fn load(shared: &Shared, owner: &Owner) -> Option<Stack> {
    match owner {
        Owner::Pause(id) => {
            let p = service::pause(shared, id, Payloads::Omitted)?;
            let d = &p.call_data;
            let stack = d
                .get("call_site")
                .and_then(|c| c.get("stack_trace"))
                .cloned()
                .unwrap_or(Value::Null);
            let when = match p.when {
                When::Before => Html::lit("<span class=\"badge before\">before the call</span>"),
                When::After => Html::lit("<span class=\"badge after\">after the call</span>"),
            };
            let mut meta = markup!("{} paused {}", when, time(p.paused_at));
            if let Some(pid) = d.get("process_pid").filter(|p| !p.is_null()) {
                html!(meta, " · process {}", text(Some(pid)));
            }
            meta.push_lit(" · <a href=\"/\">Paused calls</a>");
            if let Some(key) = d.get("process_key").and_then(Value::as_str) {
                let call = d.get("call_id").and_then(Value::as_str);
                html!(
                    meta,
                    " · <a href=\"{}\">Call tree</a>",
                    call_tree_href(key, call)
                );
            }
            repl_links(&mut meta, &p.repl_sessions);
            Some(Stack {
                method: p.method_name().to_owned(),
                frames: frames(&stack),
                meta,
                nav: "/",
            })
        }
        Owner::Call(id) => {
            let r = service::find_record(shared, id)?;
            let stack = r
                .get("call_site")
                .and_then(|c| c.get("stack_trace"))
                .cloned()
                .unwrap_or(Value::Null);
            let mut meta = Html::lit("recorded");
            if let Some(at) = r.get("started_at").and_then(Value::as_f64) {
                html!(meta, " {}", time(at));
            }
            if let Some(pid) = r.get("process_pid").filter(|p| !p.is_null()) {
                html!(meta, " · process {}", text(Some(pid)));
            }
            if let Some(key) = r.get("process_key").and_then(Value::as_str) {
                html!(
                    meta,
                    " · <a href=\"{}\">Call tree</a>",
                    call_tree_href(key, Some(id))
                );
            }
            let sessions = crate::node::strings(r.get("repl_sessions"));
            repl_links(&mut meta, &sessions);
            Some(Stack {
                method: text(r.get("method_name")),
                frames: frames(&stack),
                meta,
                nav: "/call-tree",
            })
        }
    }
}

fn repl_links(out: &mut Html, sessions: &[String]) {
    if sessions.is_empty() {
        return;
    }
    out.push_lit(" · REPL sessions:");
    for s in sessions {
        html!(
            out,
            " <a href=\"/repl/{}\"><code>{}</code></a>",
            encode_segment(s),
            s
        );
    }
}

/// `/callstack/<pause_id>` and `/callstack/call/<call_id>`: every frame, innermost caller
/// first, with the lines around it.
pub fn callstack(shared: &Shared, path: &str) -> Answer {
    let rest = path.strip_prefix("/callstack/").unwrap_or("");
    let Some((owner, extra)) = Owner::parse(rest) else {
        return Err(path.to_owned());
    };
    if !extra.is_empty() {
        return Err(path.to_owned());
    }
    let stack = load(shared, &owner).ok_or_else(|| path.to_owned())?;
    let mut main = markup!(
        "<div class=\"bar\"><h1>Call stack of <span class=\"fn\">{}</span></h1></div>\
         <p class=\"meta\">{}</p>",
        stack.method,
        stack.meta
    );
    if stack.frames.is_empty() {
        main.push_lit("<p class=\"empty\">The client sent no stack trace for this call.</p>");
        return Ok(View::new("Call stack", stack.nav, main));
    }
    let folded = stack
        .frames
        .iter()
        .filter(|f| library_frame(f).is_some())
        .count();
    main.push_lit(
        "<p class=\"hint\">Innermost caller first: frame 0 is the line that made the call.",
    );
    if folded > 0 {
        html!(
            main,
            " {} {} of the debug client or of libraries {} folded: open one to see its source.",
            folded,
            if folded == 1 { "frame" } else { "frames" },
            if folded == 1 { "is" } else { "are" }
        );
    }
    main.push_lit("</p><ol class=\"stack\" start=\"0\">");
    let mut files: HashMap<&str, Result<String, Unavailable>> = HashMap::new();
    for (i, f) in stack.frames.iter().enumerate() {
        // A frame of the debug client or a library is folded: the program's own stand out.
        let library = library_frame(f);
        if let Some(whose) = library {
            html!(
                main,
                "<li class=\"frame lib\"><details><summary><span class=\"fn\">{}</span> \
                 <span class=\"loc\">{}</span> <span class=\"whose\">· {}</span></summary>\
                 <p class=\"meta\"><a href=\"{}\">Open the frame</a></p>",
                f.function,
                f.location(),
                whose,
                owner.frame_href(i, f)
            );
        } else {
            html!(
                main,
                "<li class=\"frame\"><h2><a href=\"{}\"><span class=\"fn\">{}</span></a> \
                 <span class=\"loc\">{}</span></h2>",
                owner.frame_href(i, f),
                f.function,
                f.location()
            );
        }
        let source: &Result<String, Unavailable> = files
            .entry(f.filename.as_str())
            .or_insert_with(|| read_source(&f.filename, &shared.config.source_roots));
        match (source, f.lineno) {
            (Ok(text), Some(line)) => {
                lines_html(
                    &mut main,
                    &f.filename,
                    text,
                    line.saturating_sub(CONTEXT).max(1),
                    line + CONTEXT,
                    Some(line),
                );
            }
            (Ok(_), None) | (Err(_), _) => {
                if let Some(code) = &f.code_context {
                    html!(
                        main,
                        "<pre class=\"src\" tabindex=\"0\"><code><span class=\"line hl\">{}</span></code></pre>",
                        code
                    );
                }
                if let Err(why) = source {
                    html!(
                        main,
                        "<p class=\"notice\">Source not shown: {}.</p>",
                        why.describe()
                    );
                }
            }
        }
        if library.is_some() {
            main.push_lit("</details>");
        }
        main.push_lit("</li>");
    }
    main.push_lit("</ol>");
    Ok(View::new(
        format!("Call stack of {}", stack.method),
        stack.nav,
        main,
    ))
}

/// `/frame/<pause_id>/<i>` and `/frame/call/<call_id>/<i>`: the whole source file of frame `i`
/// of that call's stack, its line highlighted.
pub fn frame(shared: &Shared, path: &str) -> Answer {
    let rest = path.strip_prefix("/frame/").unwrap_or("");
    let Some((owner, extra)) = Owner::parse(rest) else {
        return Err(path.to_owned());
    };
    let [index] = extra.as_slice() else {
        return Err(path.to_owned());
    };
    let i: usize = index.parse().map_err(|_| path.to_owned())?;
    let stack = load(shared, &owner).ok_or_else(|| path.to_owned())?;
    let f = stack.frames.get(i).ok_or_else(|| path.to_owned())?;
    let source = match read_source(&f.filename, &shared.config.source_roots) {
        Ok(text) => Ok(text),
        Err(Unavailable::TooLarge(n)) => Err(Unavailable::TooLarge(n)),
        Err(why) => {
            log::debug!("ui: {path}: {}: {}", f.filename, why.describe());
            return Err(format!("{path} ({}: {})", f.filename, why.describe()));
        }
    };
    let mut main = markup!(
        "<div class=\"bar\"><h1><span class=\"fn\">{}</span> <span class=\"loc\">{}</span></h1></div>\
         <p class=\"meta\">Frame {} of {} in the call stack of <span class=\"fn\">{}</span> · \
         <a href=\"{}\">Call stack</a>",
        f.function,
        f.location(),
        i,
        stack.frames.len(),
        stack.method,
        owner.callstack_href(),
    );
    if i > 0 {
        html!(
            main,
            " · <a href=\"{}\" rel=\"prev\">Inner frame</a>",
            owner.frame_href(i - 1, &stack.frames[i - 1])
        );
    }
    if let Some(next) = stack.frames.get(i + 1) {
        html!(
            main,
            " · <a href=\"{}\" rel=\"next\">Outer frame</a>",
            owner.frame_href(i + 1, next)
        );
    }
    main.push_lit("</p>");
    match source {
        Ok(text) => {
            if let Some(line) = f.lineno {
                html!(
                    main,
                    "<p class=\"hint\"><a href=\"#L{}\">Go to line {}</a></p>",
                    line,
                    line
                );
            }
            lines_html(&mut main, &f.filename, &text, 1, usize::MAX, f.lineno);
        }
        Err(why) => {
            html!(
                main,
                "<p class=\"notice\">{} is not shown: {}.</p>",
                f.filename,
                why.describe()
            );
            if let Some(code) = &f.code_context {
                html!(
                    main,
                    "<pre class=\"src\" tabindex=\"0\"><code><span class=\"line hl\">{}</span></code></pre>",
                    code
                );
            }
        }
    }
    Ok(View::new(
        format!("{} · {}", f.function, f.location()),
        stack.nav,
        main,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::testing::{complete, complete_body, shared, start, start_body};
    use serde_json::json;

    use crate::service::testing::HOSTILE;

    /// With the default roots.
    fn read_source_(name: &str) -> Result<String, Unavailable> {
        read_source(name, &[])
    }

    #[test]
    fn only_source_files_outside_the_system_directories_or_under_the_roots_are_read() {
        let d = Dir::new();
        let py = d.file("m.py", "x = 1\n");
        // Not a source file by its extension, even through a link named like one.
        let secret = d.file("token", "hunter2\n");
        assert!(matches!(
            read_source_(&secret),
            Err(Unavailable::NotSource(_))
        ));
        let link = d.0.join("token.py");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        assert!(matches!(
            read_source_(&link.to_string_lossy()),
            Err(Unavailable::NotSource(_))
        ));
        // Binary content.
        let bin = d.0.join("bin.py");
        fs::write(&bin, b"x\0y").unwrap();
        assert!(matches!(
            read_source_(&bin.to_string_lossy()),
            Err(Unavailable::NotSource(_))
        ));
        // System directories, also through a link.
        for p in ["/etc/passwd", "/proc/self/environ", "/etc/shadow"] {
            assert!(read_source_(p).is_err(), "{p}");
        }
        let etc = d.0.join("etc.py");
        std::os::unix::fs::symlink("/etc/hostname", &etc).unwrap();
        assert!(read_source_(&etc.to_string_lossy()).is_err());
        // Roots: only under them.
        let other = Dir::new();
        let elsewhere = other.file("n.py", "y = 2\n");
        let roots = vec![d.0.clone()];
        assert_eq!(read_source(&py, &roots).unwrap(), "x = 1\n");
        assert_eq!(
            read_source(&elsewhere, &roots),
            Err(Unavailable::NotSource(
                "outside the --source-root directories"
            ))
        );
        assert_eq!(read_source_(&elsewhere).unwrap(), "y = 2\n");
    }

    struct Dir(std::path::PathBuf);

    impl Dir {
        fn new() -> Dir {
            let d = std::env::temp_dir().join(format!(
                "cideldill-source-{}-{}",
                std::process::id(),
                crate::ids::random_hex(6)
            ));
            fs::create_dir_all(&d).unwrap();
            Dir(d)
        }

        fn file(&self, name: &str, text: &str) -> String {
            let p = self.0.join(name);
            fs::write(&p, text).unwrap();
            p.to_string_lossy().into_owned()
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn recorded(s: &Shared, method: &str, stack: Value) -> String {
        let mut b = start_body(method, &[json!(HOSTILE)]);
        b.insert(
            "call_site".into(),
            json!({"timestamp": 10.0, "stack_trace": stack}),
        );
        let id = start(s, &b).unwrap()["call_id"]
            .as_str()
            .unwrap()
            .to_owned();
        complete(s, &complete_body(&id, &json!(1))).unwrap();
        id
    }

    fn frame_of(file: &str, line: u64, function: &str) -> Value {
        json!({"filename": file, "lineno": line, "function": function, "code_context": "ctx"})
    }

    #[test]
    fn only_regular_files_named_by_absolute_paths_are_read() {
        let d = Dir::new();
        let ok = d.file("a.py", "one\ntwo\n");
        assert_eq!(read_source_(&ok).unwrap(), "one\ntwo\n");
        assert_eq!(read_source_("a.py"), Err(Unavailable::NotAPath));
        assert_eq!(read_source_("<stdin>"), Err(Unavailable::NotAPath));
        assert_eq!(read_source_(""), Err(Unavailable::NotAPath));
        assert_eq!(
            read_source_(&d.0.to_string_lossy()),
            Err(Unavailable::NotRegular)
        );
        assert_eq!(read_source_("/dev/zero"), Err(Unavailable::NotRegular));
        assert!(matches!(
            read_source_(&format!("{}/missing.py", d.0.display())),
            Err(Unavailable::Unreadable(_))
        ));
        let big = d.0.join("big.py");
        let f = fs::File::create(&big).unwrap();
        f.set_len(MAX_SOURCE_BYTES + 1).unwrap();
        assert_eq!(
            read_source_(&big.to_string_lossy()),
            Err(Unavailable::TooLarge(MAX_SOURCE_BYTES + 1))
        );
        // A link to a regular file is read as that file; a link to a device is not.
        let link = d.0.join("link.py");
        std::os::unix::fs::symlink(&ok, &link).unwrap();
        assert_eq!(read_source_(&link.to_string_lossy()).unwrap(), "one\ntwo\n");
        let dev = d.0.join("dev.py");
        std::os::unix::fs::symlink("/dev/zero", &dev).unwrap();
        assert_eq!(
            read_source_(&dev.to_string_lossy()),
            Err(Unavailable::NotRegular)
        );
        // A FIFO is refused without blocking on its open.
        let fifo = d.0.join("fifo.py");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        assert_eq!(
            read_source_(&fifo.to_string_lossy()),
            Err(Unavailable::NotRegular)
        );
        // Invalid UTF-8 is replaced, not refused.
        let latin = d.0.join("latin.py");
        fs::write(&latin, b"caf\xe9\n").unwrap();
        assert_eq!(
            read_source_(&latin.to_string_lossy()).unwrap(),
            "caf\u{fffd}\n"
        );
    }

    #[test]
    fn a_frame_page_shows_the_file_of_that_frame_escaped_with_its_line_highlighted() {
        let s = shared();
        let d = Dir::new();
        let lines: Vec<String> = (1..=30).map(|n| format!("line {n} {HOSTILE}")).collect();
        let file = d.file("app.py", &lines.join("\n"));
        let id = recorded(&s, HOSTILE, json!([frame_of(&file, 12, HOSTILE)]));
        let page = frame(&s, &format!("/frame/call/{}/0", encode_segment(&id))).unwrap();
        let html = page.main;
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains(
            "<span class=\"line hl\" id=\"L12\"><span class=\"n\">12</span>line <span \
             class=\"tn\">12</span> &lt;/script&gt;"
        ));
        assert!(html.contains("id=\"L30\""), "the whole file");
        assert_eq!(html.matches(" hl\"").count(), 1);
        // Out of range, not a number, extra segments, unknown call: not found.
        for bad in ["1", "x", "0/1", ""] {
            assert!(
                frame(&s, &format!("/frame/call/{}/{bad}", encode_segment(&id))).is_err(),
                "{bad}"
            );
        }
        assert!(frame(&s, "/frame/call/nope/0").is_err());
        assert!(frame(&s, "/frame/nope/0").is_err());
        assert!(frame(&s, "/frame/").is_err());
    }

    #[test]
    fn frames_naming_no_regular_file_are_not_found_and_huge_files_get_a_notice() {
        let s = shared();
        let d = Dir::new();
        let big = d.0.join("big.py");
        fs::File::create(&big)
            .unwrap()
            .set_len(MAX_SOURCE_BYTES + 10)
            .unwrap();
        let id = recorded(
            &s,
            "f",
            json!([
                frame_of("/dev/zero", 1, "a"),
                frame_of(&d.0.to_string_lossy(), 1, "b"),
                frame_of(&big.to_string_lossy(), 1, "c"),
                frame_of("relative.py", 1, "d"),
            ]),
        );
        for i in [0, 1, 3] {
            let e = frame(&s, &format!("/frame/call/{}/{i}", encode_segment(&id))).unwrap_err();
            assert!(e.starts_with("/frame/call/"), "{e}");
        }
        let html = frame(&s, &format!("/frame/call/{}/2", encode_segment(&id)))
            .unwrap()
            .main;
        assert!(html.contains("larger than the 2 MiB shown"), "{html}");
        let stack = callstack(&s, &format!("/callstack/call/{}", encode_segment(&id)))
            .unwrap()
            .main;
        assert!(
            stack.contains("Source not shown: not a regular file."),
            "{stack}"
        );
        assert!(
            stack.contains("Source not shown: not a file path"),
            "{stack}"
        );
    }

    #[test]
    fn the_callstack_of_a_pause_shows_each_frame_with_its_lines_and_links() {
        let s = shared();
        let d = Dir::new();
        let lines: Vec<String> = (1..=20).map(|n| format!("src {n} <b>")).collect();
        let file = d.file("m.py", &lines.join("\n"));
        crate::service::breakpoint_add(
            &s,
            &crate::service::testing::body(json!({"function_name": HOSTILE})),
        )
        .unwrap();
        let mut b = start_body(HOSTILE, &[json!(1)]);
        b.insert(
            "call_site".into(),
            json!({"timestamp": 1.0, "stack_trace": [frame_of(&file, 10, "inner"), frame_of(&file, 2, HOSTILE)]}),
        );
        let answer = start(&s, &b).unwrap();
        let pause = answer["poll_url"]
            .as_str()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap()
            .to_owned();
        let session = crate::service::start_session(&s, &pause)
            .unwrap()
            .session_id;
        let html = callstack(&s, &format!("/callstack/{pause}")).unwrap().main;
        assert!(!html.contains("<img") && !html.contains("<b>"), "{html}");
        assert!(html.contains(&format!("href=\"/frame/{pause}/0#L10\"")));
        assert!(html.contains(&format!("href=\"/frame/{pause}/1#L2\"")));
        assert!(html.contains(&format!("href=\"/repl/{session}\"")));
        assert!(html.contains("href=\"/call-tree/1795311683.500000%2B4242?selected="));
        assert!(html.contains("id=\"L15\""), "five lines after");
        assert!(!html.contains("id=\"L16\""));
        assert!(html.contains("id=\"L5\"") && html.contains("id=\"L1\""));
        assert!(html.contains("<span class=\"line hl\" id=\"L10\">"));
        let page = frame(&s, &format!("/frame/{pause}/1")).unwrap().main;
        assert!(page.contains("<span class=\"line hl\" id=\"L2\">"));
        assert!(page.contains("Inner frame"));
        // Resumed: gone.
        crate::service::testing::resume(&s, &pause);
        assert!(callstack(&s, &format!("/callstack/{pause}")).is_err());
        assert!(frame(&s, &format!("/frame/{pause}/0")).is_err());
        assert!(callstack(&s, "/callstack/unknown").is_err());
        assert!(callstack(&s, "/callstack/call/unknown").is_err());
    }

    #[test]
    fn frames_of_the_debug_client_and_of_libraries_are_folded_and_source_is_marked() {
        let s = shared();
        let d = Dir::new();
        let mine = d.file("app.py", "def f(x):\n    return x  # done\n");
        let client = d.0.join("cideldill_client");
        fs::create_dir(&client).unwrap();
        fs::write(client.join("debug_proxy.py"), "def wrapper():\n    pass\n").unwrap();
        let proxy = client.join("debug_proxy.py").to_string_lossy().into_owned();
        let id = recorded(
            &s,
            "f",
            json!([
                frame_of(&proxy, 2, "wrapper"),
                frame_of(&mine, 2, "f"),
                frame_of("/usr/lib/python3.13/runpy.py", 88, "_run_code"),
            ]),
        );
        let html = callstack(&s, &format!("/callstack/call/{}", encode_segment(&id)))
            .unwrap()
            .main;
        assert!(
            html.contains("2 frames of the debug client or of libraries are folded"),
            "{html}"
        );
        assert_eq!(html.matches("<li class=\"frame lib\"><details>").count(), 2);
        assert!(html.contains("· the debug client</span></summary>"));
        assert!(html.contains("· a library</span></summary>"));
        assert_eq!(html.matches("<li class=\"frame\"><h2>").count(), 1);
        // The program's own frame, marked: keyword, comment.
        assert!(
            html.contains("<span class=\"tk\">return</span> x  <span class=\"tc\"># done</span>"),
            "{html}"
        );
        assert!(html.contains("<pre class=\"src\" tabindex=\"0\">"));
    }
}
