//! The port file: how debug clients find the running server (bare digits, protocol doc §6), and
//! how a second server (or a `--mcp` process that joins) finds out that one is running.
//!
//! A server claims the file atomically: it writes its port to a private temporary file and
//! hard-links it into place, which fails when the file exists, so a reader never sees a half
//! written file and two servers never both believe they wrote it. A server never overwrites the
//! port file of a live server, and at exit removes the file only if it wrote it and the file
//! still names its port.
//!
//! What may be replaced: only a small regular file (not a link, not a FIFO or device: its type
//! is read without following links before anything opens it, and it is opened without
//! blocking) that holds digits and whitespace, and that a server of ours wrote. The port file
//! must stay bare digits (the Python client reads `int(text.strip())`), so what marks it as
//! ours is beside it: the secret file of the port it names (below), a private file of our own
//! user's. A file of digits without it (another program's pid file, say) is not ours, and is
//! refused like anything else, except at the data directory's own `port`, where only the
//! debugger's servers write (the original one too, which wrote no secret and never removed its
//! file): there it is taken as a stale port file. Anything refused is named in the message, left
//! alone, and the server does not start. A port file is stale, and replaced, when the server it
//! names cannot prove that it is ours.
//!
//! At exit a server removes the port file only if it is still the very file it wrote (the same
//! file system and inode, read when it was written) and still names its port.
//!
//! The proof: before the port file, the server writes a random 32-byte secret, in hex, to
//! `<port file>.<port>.secret` (created new, 0600, never following a link). Whoever asks
//! (a joining `--mcp` process, a newly started server) reads that file, which must be a
//! regular file owned by its own user and not readable by others, sends a random nonce as
//! `GET /api/status?join_nonce=<hex>`, and accepts the server only if its answer carries
//! `X-Cideldill-Join-Proof: HMAC-SHA256(secret, "cideldill-join-proof" port nonce)` and
//! names the same port file; where `/proc/net/tcp` tells who listens on the port, that must be
//! the same user too. Another local user can neither read the secret nor compute the
//! proof; a process answering on a port named by a stale port file cannot either, and asking a
//! real server for a proof gets one bound to that server's own port and secret.
//! The secret file is removed with the port file.

use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// How long asking a port whether a server of ours listens there may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest port file (or secret file) read: a port and some whitespace.
const MAX_FILE_BYTES: u64 = 64;
/// The query parameter of `GET /api/status` that asks for a proof.
pub const NONCE_PARAM: &str = "join_nonce";
/// The answer header that carries it.
pub const PROOF_HEADER: &str = "X-Cideldill-Join-Proof";

/// A live server of ours that a port file names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Running {
    pub port: u16,
    pub pid: u32,
    pub version: String,
}

impl Running {
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// What became of the port file when a server started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// This server wrote it (this file); it removes it at exit.
    Owned(Written),
    /// It names another live server, and was left alone.
    Other(Running),
}

/// The port file a server wrote: its file system, inode and change time, so that it removes
/// that file and no other put in its place (a new file may get a freed inode number again, not
/// the same change time too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    dev: u64,
    ino: u64,
    ctime: (i64, i64),
}

impl Written {
    fn of(meta: &std::fs::Metadata) -> Written {
        Written {
            dev: meta.dev(),
            ino: meta.ino(),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// Whether a file of digits that no server of ours marked may be replaced (see the module
/// documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unmarked {
    /// The data directory's own `port`: a stale port file, the original server's perhaps.
    Stale,
    /// Any other path: not ours, refused.
    Refuse,
}

/// The secret a server proves itself with (see the module documentation).
#[derive(Clone)]
pub struct Secret {
    port: u16,
    key: [u8; 32],
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret {{ port: {}, .. }}", self.port)
    }
}

impl Secret {
    /// A new random secret for the server on `port` (from the OS random source: no secret
    /// rather than a guessable one).
    pub fn new(port: u16) -> io::Result<Secret> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| io::Error::other(format!("random source: {e}")))?;
        Ok(Secret { port, key })
    }

    /// The proof for `nonce` (hex, at most 128 digits; `None` for anything else).
    pub fn prove(&self, nonce: &str) -> Option<String> {
        let ok =
            !nonce.is_empty() && nonce.len() <= 128 && nonce.bytes().all(|b| b.is_ascii_hexdigit());
        ok.then(|| proof(&self.key, self.port, nonce))
    }
}

/// HMAC-SHA256(key, "cideldill-join-proof" port nonce), in hex.
fn proof(key: &[u8; 32], port: u16, nonce: &str) -> String {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(key);
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(b"cideldill-join-proof\0")
        .chain_update(port.to_string())
        .chain_update(b"\0")
        .chain_update(nonce)
        .finalize();
    let outer = Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize();
    crate::ids::hex(&outer)
}

/// Where the server on `port` keeps the secret of the port file `path`.
pub fn secret_path(path: &Path, port: u16) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{port}.secret"));
    path.with_file_name(name)
}

/// What is at the port file's path.
#[derive(Debug, PartialEq, Eq)]
enum Found {
    Missing,
    /// A small regular file holding a port.
    Port(u16),
    /// A small regular file with digits that are no port (such as 0 or 99999): stale.
    Digits,
    /// Anything else: not ours to touch. The text says what it is.
    Foreign(String),
}

/// Reads a small regular file (never a link, FIFO or device; nothing blocks), `Err` saying
/// what is there instead.
fn read_small(path: &Path) -> io::Result<Result<Vec<u8>, String>> {
    let meta = std::fs::symlink_metadata(path)?;
    let kind = meta.file_type();
    let what = if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_dir() {
        "a directory"
    } else if !kind.is_file() {
        "a FIFO, socket or device"
    } else if meta.len() > MAX_FILE_BYTES {
        "a file too large to be a port file"
    } else {
        ""
    };
    if !what.is_empty() {
        return Ok(Err(what.to_owned()));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Ok(Err("not a regular file".to_owned()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Ok(Err("a file too large to be a port file".to_owned()));
    }
    Ok(Ok(bytes))
}

fn inspect(path: &Path) -> io::Result<Found> {
    let bytes = match read_small(path) {
        Ok(Ok(b)) => b,
        Ok(Err(what)) => return Ok(Found::Foreign(what)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Found::Missing),
        Err(e) => return Err(e),
    };
    let text = String::from_utf8_lossy(&bytes);
    let digits = text.trim();
    if bytes
        .iter()
        .all(|b| b.is_ascii_digit() || b.is_ascii_whitespace())
    {
        return Ok(match digits.parse::<u16>() {
            Ok(port) if port > 0 => Found::Port(port),
            _ => Found::Digits,
        });
    }
    Ok(Found::Foreign(
        "a file that does not hold a port".to_owned(),
    ))
}

/// The port the file names, if it is a port file holding one.
pub fn read(path: &Path) -> Option<u16> {
    match inspect(path) {
        Ok(Found::Port(port)) => Some(port),
        _ => None,
    }
}

/// The key in the secret file of the server on `port`, if it is a small regular file of our
/// own user's that no one else may read.
fn read_secret(path: &Path, port: u16) -> Option<[u8; 32]> {
    let at = secret_path(path, port);
    let meta = std::fs::symlink_metadata(&at).ok()?;
    if !meta.is_file() || meta.uid() != crate::sys::euid() || meta.mode() & 0o077 != 0 {
        log::debug!("the secret file {} is not ours alone", at.display());
        return None;
    }
    let bytes = read_small(&at).ok()?.ok()?;
    let text = std::str::from_utf8(&bytes).ok()?.trim();
    if text.len() != 64 {
        return None;
    }
    let mut key = [0u8; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(key)
}

/// The live server of ours that the port file names: it must prove it (see the module
/// documentation), not merely say so (a port file outlives a killed server, and its port may
/// since belong to anything, a process of another user's included).
pub fn running_server(path: &Path) -> Option<Running> {
    let port = read(path)?;
    let key = read_secret(path, port)?;
    if let Some(uid) = listener_uid(port).filter(|&uid| uid != crate::sys::euid()) {
        log::warn!(
            "port {port}, named by the port file {}, is held by another user (uid {uid}); it \
             is not joined",
            path.display()
        );
        return None;
    }
    let nonce = crate::ids::random_hex(16);
    let (status, answer) = probe(port, &nonce)?;
    let expected = proof(&key, port, &nonce);
    if !answer.is_some_and(|a| same_bytes(a.as_bytes(), expected.as_bytes())) {
        log::warn!(
            "the server on port {port} named by the port file {} did not prove that it is ours; \
             it is not joined",
            path.display()
        );
        return None;
    }
    let ours = status.get("server").and_then(Value::as_str) == Some("cideldill-server");
    let same_file = status
        .get("port_file")
        .and_then(Value::as_str)
        .is_some_and(|p| same_path(Path::new(p), path));
    let pid = status.get("pid").and_then(Value::as_u64)?;
    (ours && same_file).then(|| Running {
        port,
        pid: u32::try_from(pid).unwrap_or(0),
        version: status
            .get("version")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
    })
}

/// The user owning the socket that listens on `port`, as `/proc/net/tcp` and `tcp6` tell
/// (Linux; `None` when they do not).
fn listener_uid(port: u16) -> Option<u32> {
    const LISTEN: &str = "0A";
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .find_map(|text| {
            text.lines().skip(1).find_map(|line| {
                // sl local_address rem_address st tx:rx tr:when retrnsmt uid ...
                let f: Vec<&str> = line.split_whitespace().collect();
                let local_port = f.get(1)?.rsplit_once(':')?.1;
                let listens = f.get(3) == Some(&LISTEN)
                    && u16::from_str_radix(local_port, 16).ok() == Some(port);
                listens.then(|| f.get(7)?.parse().ok()).flatten()
            })
        })
}

/// Compares without stopping at the first difference.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `GET /api/status?join_nonce=…` on a loopback port, within `PROBE_TIMEOUT`: the status and
/// the proof header.
fn probe(port: u16, nonce: &str) -> Option<(Value, Option<String>)> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(PROBE_TIMEOUT))
        .build()
        .into();
    let resp = agent
        .get(&format!(
            "http://127.0.0.1:{port}/api/status?{NONCE_PARAM}={nonce}"
        ))
        .call()
        .ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let mut answers = resp.headers().get_all(PROOF_HEADER).iter();
    let answer = match (answers.next(), answers.next()) {
        (Some(v), None) => v.to_str().ok().map(str::to_owned),
        _ => None,
    };
    let bytes = resp
        .into_body()
        .into_with_config()
        .limit(64 << 10)
        .read_to_vec()
        .ok()?;
    Some((serde_json::from_slice(&bytes).ok()?, answer))
}

/// Whether two paths name the same file (compared as given when either cannot be resolved).
fn same_path(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// Why a port file is not replaced.
fn foreign(path: &Path, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "{} is {what}, not a port file; it is left alone (remove it, or choose another \
             --port-file or CIDELDILL_PORT_FILE)",
            path.display()
        ),
    )
}

/// Removes a file at `at` if it is a regular file of our own user's (a secret left behind).
fn remove_own(at: &Path) {
    if let Ok(meta) = std::fs::symlink_metadata(at) {
        if meta.is_file() && meta.uid() == crate::sys::euid() {
            let _ = std::fs::remove_file(at);
        }
    }
}

/// Writes `secret` for the port file `path` (replacing one of ours left by a killed server on
/// the same port; refusing anything else).
fn write_secret(path: &Path, secret: &Secret) -> io::Result<()> {
    let at = secret_path(path, secret.port);
    let text = crate::ids::hex(&secret.key);
    match crate::files::write_new(&at, text.as_bytes()) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        other => return other,
    }
    // A port is bound by one server at a time, and this one holds it now: a file of ours at
    // that path is a killed server's.
    let meta = std::fs::symlink_metadata(&at)?;
    if !meta.is_file() || meta.uid() != crate::sys::euid() {
        return Err(foreign(&at, "not a secret file of this user's"));
    }
    std::fs::remove_file(&at)?;
    crate::files::write_new(&at, text.as_bytes())
}

/// Why a file of digits is not replaced: no server of ours marked it.
fn unmarked(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "{} holds digits, but no server of ours wrote it (there is no secret file of ours \
             beside it: it may be another program's file, such as a pid file); it is left alone \
             (remove it if it is a stale port file, or choose another --port-file or \
             CIDELDILL_PORT_FILE)",
            path.display()
        ),
    )
}

/// Whether what `found` at `path` may be replaced: a port file a server of ours marked, or,
/// where `unmarked` allows it, any file of digits. `Err` says why not.
fn replaceable(path: &Path, found: &Found, unmarked_ok: Unmarked) -> io::Result<()> {
    let marked = match found {
        Found::Missing => return Ok(()),
        Found::Foreign(what) => return Err(foreign(path, what)),
        Found::Port(p) => read_secret(path, *p).is_some(),
        Found::Digits => false,
    };
    if marked || unmarked_ok == Unmarked::Stale {
        Ok(())
    } else {
        Err(unmarked(path))
    }
}

/// Claims the port file for the server holding `secret` (see the module documentation).
pub fn claim(path: &Path, secret: &Secret, unmarked_ok: Unmarked) -> io::Result<Claim> {
    let port = secret.port;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        crate::files::create_dirs(dir)?;
    }
    // Refuse what is not a port file of ours before writing anything beside it.
    replaceable(path, &inspect(path)?, unmarked_ok)?;
    write_secret(path, secret)?;
    let claimed = claim_file(path, port, unmarked_ok);
    if !matches!(claimed, Ok(Claim::Owned(_))) {
        remove_own(&secret_path(path, port));
    }
    claimed
}

fn claim_file(path: &Path, port: u16, unmarked_ok: Unmarked) -> io::Result<Claim> {
    // Two rounds: a stale file is removed once, then the claim is tried again; losing that
    // second race to another new server leaves the file to it.
    for _ in 0..2 {
        if let Some(written) = create_new(path, port)? {
            return Ok(Claim::Owned(written));
        }
        let found = inspect(path)?;
        replaceable(path, &found, unmarked_ok)?;
        let named = match found {
            Found::Missing => continue,
            Found::Port(p) => Some(p),
            Found::Digits | Found::Foreign(_) => None,
        };
        match running_server(path) {
            Some(other) if other.pid != std::process::id() => return Ok(Claim::Other(other)),
            _ => {
                log::info!("replacing the stale port file {}", path.display());
                match std::fs::remove_file(path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
                if let Some(stale) = named.filter(|&p| p != port) {
                    remove_own(&secret_path(path, stale));
                }
            }
        }
    }
    match running_server(path) {
        Some(other) => Ok(Claim::Other(other)),
        None => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "another server keeps replacing it",
        )),
    }
}

/// Creates the file holding `port`, whole, unless it exists (`None` then); the file written.
fn create_new(path: &Path, port: u16) -> io::Result<Option<Written>> {
    let tmp = temporary_beside(path);
    // A temporary file left by a killed process of the same pid.
    remove_own(&tmp);
    // Compat: bare digits, no newline.
    crate::files::write_new(&tmp, port.to_string().as_bytes())?;
    // The link is the same file: read through this handle once the links are made, since
    // making them changes the file's change time.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp);
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            let meta = match file.and_then(|f| f.metadata()) {
                Ok(meta) => meta,
                Err(_) => std::fs::symlink_metadata(path)?,
            };
            Ok(Some(Written::of(&meta)))
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(None),
        // A file system without hard links: create-new, then write (a reader may briefly see
        // an empty file, which clients retry).
        Err(_) => match crate::files::write_new(path, port.to_string().as_bytes()) {
            Ok(()) => std::fs::symlink_metadata(path).map(|m| Some(Written::of(&m))),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(None),
            Err(e) => Err(e),
        },
    }
}

fn temporary_beside(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.tmp", std::process::id()));
    path.with_file_name(name)
}

/// Removes the port file if it is still the file `written` and names `port` (a server removes
/// only the file it wrote, not one put in its place), and the secret of the server on `port`.
pub fn release(path: &Path, port: u16, written: Written) {
    let same =
        std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && Written::of(&m) == written);
    if same && read(path) == Some(port) {
        if let Err(e) = std::fs::remove_file(path) {
            log::warn!("could not remove port file {}: {e}", path.display());
        }
    } else if std::fs::symlink_metadata(path).is_ok() {
        log::info!(
            "the port file {} is no longer the one this server wrote; it is left alone",
            path.display()
        );
    }
    remove_own(&secret_path(path, port));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cdd-portfile-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    fn owned(claim: io::Result<Claim>) -> Written {
        match claim {
            Ok(Claim::Owned(written)) => written,
            other => panic!("not claimed: {other:?}"),
        }
    }

    #[test]
    fn a_missing_or_stale_file_is_claimed_whole_and_released_only_by_its_owner() {
        let d = dir("claim");
        let path = d.join("sub").join("port");
        let s1 = Secret::new(40001).unwrap();
        let w1 = owned(claim(&path, &s1, Unmarked::Refuse));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "40001");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&secret_path(&path, 40001)), 0o600);
        assert_eq!(mode(&d.join("sub")), 0o700);
        // Port 1 answers nothing of ours: at the data directory's own port file, the file is
        // stale and replaced.
        std::fs::write(&path, "1\n").unwrap();
        let w2 = owned(claim(&path, &Secret::new(40002).unwrap(), Unmarked::Stale));
        assert_eq!(read(&path), Some(40002));
        // Not ours to remove once it names another port.
        release(&path, 40001, w1);
        assert!(path.exists());
        assert!(!secret_path(&path, 40001).exists());
        release(&path, 40002, w2);
        assert!(!path.exists());
        assert!(!secret_path(&path, 40002).exists());
        // Digits that are no port are stale too; no temporary file is left behind.
        std::fs::write(&path, "0").unwrap();
        owned(claim(&path, &Secret::new(40003).unwrap(), Unmarked::Stale));
        let mut names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["port", "port.40003.secret"]);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn digits_that_no_server_of_ours_marked_are_refused_unless_in_the_data_directory() {
        let d = dir("unmarked");
        let path = d.join("other.pid");
        for digits in ["4242\n", "40010", "0", " 31337 "] {
            std::fs::write(&path, digits).unwrap();
            let err = claim(&path, &Secret::new(40010).unwrap(), Unmarked::Refuse).unwrap_err();
            assert!(
                err.to_string().contains("no server of ours wrote it"),
                "{err}"
            );
            assert_eq!(std::fs::read_to_string(&path).unwrap(), digits);
            let mut names: Vec<_> = std::fs::read_dir(&d)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            assert_eq!(names, ["other.pid"], "nothing written beside it");
        }
        // A port file of ours left by a killed server (its secret beside it) is replaced.
        std::fs::remove_file(&path).unwrap();
        let killed = Secret::new(40011).unwrap();
        owned(claim(&path, &killed, Unmarked::Refuse));
        let w = owned(claim(&path, &Secret::new(40012).unwrap(), Unmarked::Refuse));
        assert_eq!(read(&path), Some(40012));
        assert!(
            !secret_path(&path, 40011).exists(),
            "the stale secret goes too"
        );
        // A secret that is not ours alone marks nothing.
        release(&path, 40012, w);
        std::fs::write(&path, "40013").unwrap();
        let fake = secret_path(&path, 40013);
        std::fs::write(&fake, "ab".repeat(32)).unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(claim(&path, &Secret::new(40014).unwrap(), Unmarked::Refuse).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "40013");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn only_the_very_file_written_is_removed() {
        let d = dir("release");
        let path = d.join("port");
        let w = owned(claim(&path, &Secret::new(40020).unwrap(), Unmarked::Refuse));
        // Replaced by another file with the same digits (another program's, written anew).
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "40020").unwrap();
        release(&path, 40020, w);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "40020");
        assert!(!secret_path(&path, 40020).exists(), "our own secret goes");
        // Rewritten in place with other digits: left alone too.
        std::fs::remove_file(&path).unwrap();
        let w = owned(claim(&path, &Secret::new(40021).unwrap(), Unmarked::Refuse));
        std::fs::write(&path, "7").unwrap();
        release(&path, 40021, w);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "7");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn what_is_not_a_port_file_is_refused_and_left_alone() {
        let d = dir("foreign");
        let path = d.join("port");
        std::fs::write(&path, "not a port").unwrap();
        let err = claim(&path, &Secret::new(40004).unwrap(), Unmarked::Stale).unwrap_err();
        assert!(err.to_string().contains("not a port file"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "not a port");
        assert!(!secret_path(&path, 40004).exists());
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(d.join("elsewhere"), &path).unwrap();
        assert!(claim(&path, &Secret::new(40005).unwrap(), Unmarked::Stale).is_err());
        assert!(std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(read(&path), None);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_secret_file_that_others_may_read_or_that_is_wrong_proves_nothing() {
        let d = dir("secret");
        let path = d.join("port");
        let s = Secret::new(40006).unwrap();
        write_secret(&path, &s).unwrap();
        assert_eq!(read_secret(&path, 40006), Some(s.key));
        let at = secret_path(&path, 40006);
        std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(read_secret(&path, 40006), None);
        std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o600)).unwrap();
        // A killed server's secret on the same port is replaced.
        let s2 = Secret::new(40006).unwrap();
        write_secret(&path, &s2).unwrap();
        assert_eq!(read_secret(&path, 40006), Some(s2.key));
        // Proofs: bound to the key, the port and the nonce; odd nonces get none.
        let p = s2.prove("00ff").unwrap();
        assert_eq!(p, proof(&s2.key, 40006, "00ff"));
        assert_ne!(p, proof(&s2.key, 40007, "00ff"));
        assert_ne!(p, proof(&s.key, 40006, "00ff"));
        assert_ne!(p, s2.prove("00fe").unwrap());
        assert_eq!(s2.prove(""), None);
        assert_eq!(s2.prove("zz"), None);
        assert_eq!(s2.prove(&"a".repeat(129)), None);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_owner_of_a_listening_port_is_read_from_proc() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        if Path::new("/proc/net/tcp").exists() {
            assert_eq!(listener_uid(port), Some(crate::sys::euid()));
        }
        drop(l);
        assert_eq!(listener_uid(port), None);
    }

    #[test]
    fn hmac_matches_the_rfc_4231_construction() {
        // HMAC-SHA256 with a 32-byte key equals the textbook construction (checked against
        // Python's hmac module: hmac.new(bytes(range(32)), b"cideldill-join-proof\0" + b"5174\0"
        // + b"abcd", "sha256").hexdigest()).
        let mut key = [0u8; 32];
        for (i, b) in key.iter_mut().enumerate() {
            *b = i as u8;
        }
        assert_eq!(
            proof(&key, 5174, "abcd"),
            "20e66071a745a1c48f7010cfc2d014f5928a377f2e69e7df310feb51190e8f92"
        );
    }
}
