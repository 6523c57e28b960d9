//! The port file: how debug clients find the running server (bare digits, protocol doc §6), and
//! how a second server finds out that one is running.
//!
//! A server claims the file atomically: it writes its port to a private temporary file and
//! hard-links it into place, which fails when the file exists, so a reader never sees a half
//! written file and two servers never both believe they wrote it. An existing file is replaced
//! only when it is stale: when the server it names does not answer `GET /api/status` as a
//! server of ours started with the same port file. A server never overwrites the port file of a
//! live server, and at exit removes the file only if it wrote it and the file still names its
//! port.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

/// How long asking a port whether a server of ours listens there may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

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
    /// This server wrote it; it removes it at exit.
    Owned,
    /// It names another live server, and was left alone.
    Other(Running),
}

/// The port the file names, if it holds one.
pub fn read(path: &Path) -> Option<u16> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The live server of ours that the port file names: asked, not trusted (a port file outlives a
/// killed server, and its port may since belong to anything).
pub fn running_server(path: &Path) -> Option<Running> {
    let port = read(path)?;
    let status = probe(port)?;
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

/// `GET /api/status` on a loopback port, within `PROBE_TIMEOUT`.
fn probe(port: u16) -> Option<Value> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(PROBE_TIMEOUT))
        .build()
        .into();
    let resp = agent
        .get(&format!("http://127.0.0.1:{port}/api/status"))
        .call()
        .ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let bytes = resp
        .into_body()
        .into_with_config()
        .limit(64 << 10)
        .read_to_vec()
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Whether two paths name the same file (compared as given when either cannot be resolved).
fn same_path(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// Claims the port file for `port` (see the module documentation).
pub fn claim(path: &Path, port: u16) -> io::Result<Claim> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    // Two rounds: a stale file is removed once, then the claim is tried again; losing that
    // second race to another new server leaves the file to it.
    for _ in 0..2 {
        if create_new(path, port)? {
            return Ok(Claim::Owned);
        }
        match running_server(path) {
            Some(other) if other.pid != std::process::id() => return Ok(Claim::Other(other)),
            _ => {
                log::info!("replacing the stale port file {}", path.display());
                match std::fs::remove_file(path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
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

/// Creates the file holding `port`, whole, unless it exists (false then).
fn create_new(path: &Path, port: u16) -> io::Result<bool> {
    let tmp = temporary_beside(path);
    // Compat: bare digits, no newline.
    std::fs::write(&tmp, port.to_string())?;
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        // A file system without hard links: create-new, then write (a reader may briefly see
        // an empty file, which clients retry).
        Err(_) => match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
        {
            Ok(mut f) => {
                io::Write::write_all(&mut f, port.to_string().as_bytes())?;
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        },
    }
}

fn temporary_beside(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.tmp", std::process::id()));
    path.with_file_name(name)
}

/// Removes the port file if it still names `port` (a server removes only the file it wrote).
pub fn release(path: &Path, port: u16) {
    if read(path) == Some(port) {
        if let Err(e) = std::fs::remove_file(path) {
            log::warn!("could not remove port file {}: {e}", path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cdd-portfile-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_missing_or_stale_file_is_claimed_whole_and_released_only_by_its_owner() {
        let d = dir("claim");
        let path = d.join("sub").join("port");
        assert_eq!(claim(&path, 40001).unwrap(), Claim::Owned);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "40001");
        // Port 1 answers nothing of ours: the file is stale and replaced.
        std::fs::write(&path, "1").unwrap();
        assert_eq!(claim(&path, 40002).unwrap(), Claim::Owned);
        assert_eq!(read(&path), Some(40002));
        // Not ours to remove once it names another port.
        release(&path, 40001);
        assert!(path.exists());
        release(&path, 40002);
        assert!(!path.exists());
        // Garbage is stale too; no temporary file is left behind.
        std::fs::write(&path, "not a port").unwrap();
        assert_eq!(claim(&path, 40003).unwrap(), Claim::Owned);
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["port"]);
        let _ = std::fs::remove_dir_all(&d);
    }
}
