//! Files and directories the server creates are its user's alone: directories 0700, files
//! 0600, whatever the umask (the mode asked at creation is narrowed by the umask, never widened,
//! so it is set again explicitly on the open file or the new directory). The database holds
//! pickled arguments (passwords, tokens); the port file's secret proves a server to `--mcp`.
//!
//! Existing directories are not changed silently, except the server's own default ones
//! (`~/.cideldill` when `CIDELDILL_HOME` is not set, and `db` and `run` under the data home),
//! which are narrowed to 0700 with a notice; a directory the user chose (`CIDELDILL_HOME`, the
//! directory of `--db`) that other users can enter gets a warning at start instead. A shared
//! directory with the sticky bit (such as `/tmp`) gets no warning: what the server puts there
//! is 0600 and cannot be removed or renamed by other users.

use std::fs::{File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The mode of the files the server creates.
pub const FILE_MODE: u32 = 0o600;
/// The mode of the directories the server creates.
pub const DIR_MODE: u32 = 0o700;

/// Creates `dir` and its missing ancestors, each 0700 (the existing ones are left as they are).
pub fn create_dirs(dir: &Path) -> io::Result<()> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dirs(parent)?;
    }
    match std::fs::DirBuilder::new().mode(DIR_MODE).create(dir) {
        Ok(()) => std::fs::set_permissions(dir, Permissions::from_mode(DIR_MODE)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Options that create a file 0600 (see [`restrict`] for the umask).
pub fn private_options() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.mode(FILE_MODE);
    o
}

/// Sets an open file that we created to 0600, whatever the umask made of its mode.
pub fn restrict(file: &File) -> io::Result<()> {
    let meta = file.metadata()?;
    if meta.mode() & 0o7777 != FILE_MODE && meta.uid() == crate::sys::euid() {
        file.set_permissions(Permissions::from_mode(FILE_MODE))?;
    }
    Ok(())
}

/// Writes a new file holding `bytes`, 0600; fails if anything exists at `path` (a link is not
/// followed).
pub fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = private_options().write(true).create_new(true).open(path)?;
    restrict(&f)?;
    io::Write::write_all(&mut f, bytes)
}

/// Group or world permission bits of a directory that is not a sticky shared one.
fn open_to_others(meta: &std::fs::Metadata) -> bool {
    meta.mode() & 0o077 != 0 && meta.mode() & 0o1000 == 0
}

/// Narrows one of the server's own default directories to 0700 (with a notice) when other
/// users may enter or read it; `false` when it is left as it was (not ours, or it failed).
pub fn narrow_own_dir(dir: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return false;
    };
    if !meta.is_dir() || !open_to_others(&meta) || meta.uid() != crate::sys::euid() {
        return false;
    }
    match std::fs::set_permissions(dir, Permissions::from_mode(DIR_MODE)) {
        Ok(()) => {
            log::info!(
                "{} was open to other users (mode {:o}); narrowed to 0700: it holds the \
                 server's data",
                dir.display(),
                meta.mode() & 0o7777
            );
            true
        }
        Err(e) => {
            log::warn!("could not narrow {} to 0700: {e}", dir.display());
            false
        }
    }
}

/// Warns when a directory the user chose for the server's data is open to other users.
pub fn warn_if_open(dir: &Path, what: &str) -> bool {
    let Ok(meta) = std::fs::metadata(dir) else {
        return false;
    };
    if meta.is_dir() && open_to_others(&meta) {
        log::warn!(
            "{what} {} is accessible to other users (mode {:o}): the files in it are 0600, but \
             other users can list their names; `chmod 700 {}` keeps it private",
            dir.display(),
            meta.mode() & 0o7777,
            dir.display()
        );
        return true;
    }
    false
}

/// Warns when a data file that exists is readable or writable by other users.
pub fn warn_if_file_open(path: &Path, what: &str) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    if meta.is_file() && meta.mode() & 0o077 != 0 {
        log::warn!(
            "{what} {} is accessible to other users (mode {:o}); `chmod 600 {}` keeps it private",
            path.display(),
            meta.mode() & 0o7777,
            path.display()
        );
        return true;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().mode() & 0o7777
    }

    #[test]
    fn created_dirs_and_files_are_private_and_open_dirs_are_reported() {
        let base = std::env::temp_dir().join(format!("cdd-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        std::fs::set_permissions(&base, Permissions::from_mode(0o755)).unwrap();
        let deep = base.join("a").join("b");
        create_dirs(&deep).unwrap();
        assert_eq!(mode(&base.join("a")), 0o700);
        assert_eq!(mode(&deep), 0o700);
        assert_eq!(mode(&base), 0o755, "an existing directory is left alone");
        let f = deep.join("f");
        write_new(&f, b"x").unwrap();
        assert_eq!(mode(&f), 0o600);
        assert!(write_new(&f, b"y").is_err());
        assert!(warn_if_open(&base, "test"));
        assert!(!warn_if_open(&deep, "test"));
        assert!(narrow_own_dir(&base));
        assert_eq!(mode(&base), 0o700);
        let _ = std::fs::remove_dir_all(&base);
    }
}
