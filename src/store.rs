//! The server's content store: content-addressed blobs plus an append-only
//! stream of JSON records (call records and execution-history entries).
//!
//! # What lives here
//!
//! * [`Store`]: one type, two backends. [`Store::memory`] keeps everything in
//!   RAM and forgets it on exit. [`Store::open`] uses a durable single-file
//!   append-only log; it keeps only an index (CID → offset, length, format,
//!   time) in RAM and reads blob bytes back from the file on [`Store::get`].
//! * Blobs are keyed by CID: the lowercase hex SHA-512 of the raw bytes
//!   (128 characters). Callers verify CIDs before [`Store::put_blobs`]; the
//!   store trusts them on write (it only checks they are 128 lowercase hex
//!   digits) and re-verifies every record when the file is opened.
//! * JSON records are written durably and handed back, in append order, by
//!   [`Store::open`] in [`Recovered`]. The store does not keep them in RAM
//!   afterwards; the memory backend accepts and discards them.
//!
//! # Invariants
//!
//! * A CID is stored at most once. A blob already present keeps its first
//!   format and `stored_at`; later puts of the same CID are no-ops. A
//!   duplicate found on open is ignored in favour of the first copy.
//! * [`Store::list`] returns blobs in insertion (file) order.
//! * The `Mutex` inside [`Store`] is a leaf lock: nothing outside this module
//!   is called while it is held. Blob reads on the log backend happen after
//!   it is released (committed bytes in the file never change).
//! * Nothing in this module panics on any file content.
//!
//! # On-disk format (version 1; all integers little-endian)
//!
//! ```text
//! file      = file_header record*
//! file_header (16 bytes):
//!   0..8    magic    b"CDLSTORE"
//!   8..12   version  u32 = 1
//!   12..16  reserved u32 = 0
//! record    = header(32) digest(64) body(body_len)
//! header (32 bytes):
//!   0..4    record magic  CD 5E C0 7D
//!   4       kind     1 = blob, 2 = call record, 3 = history entry or settings
//!   5       format   0 = unknown, 1 = dill, 2 = json  (0 for JSON records)
//!   6..8    reserved 0
//!   8..16   stored_at  f64 (seconds since the Unix epoch)
//!   16..24  body_len   u64
//!   24..32  check      first 8 bytes of SHA-512(header[0..24])
//! digest (64 bytes): SHA-512(body). For a blob the body is the raw bytes,
//!   so the digest *is* the CID and the record verifies itself by its CID.
//!   For a JSON record the body is compact JSON text.
//! ```
//!
//! Settings records (changes of the breakpoints and behaviours, [`RecordKind::Settings`]) share
//! kind 3 with history entries. A new kind byte would not verify in a server of the previous
//! version (no settings records): it would drop such a record, or cut it off as a torn tail
//! when it is the last one. With kind 3 that server reads them as history entries it cannot
//! parse and skips them, so it opens a newer file without a warning and without losing
//! anything. They are told apart by their body: a JSON object with a `"settings"` key and no
//! `"id"` (every history entry has an `"id"`). In the `.idx` file (derived, rebuilt at every
//! open) they have kind 4. The file version stays 2: a version bump would make the previous
//! server refuse the file.
//!
//! Deleting (a run, `service::delete_run`) appends a tombstone, a settings record that may list
//! objects under [`FORGET_KEY`]: [`Store::forget`] writes and syncs it before anything changes,
//! then drops those objects from the index (the memory backend frees their bytes; in the file
//! the bytes stay, unreachable: the log is append-only and nothing compacts it) and marks the
//! `.idx` entries of the deleted JSON records with kind 5, which no listing asks for. On open
//! the scan applies a tombstone's [`FORGET_KEY`] where it stands in the log (an object stored
//! again later is a new object), and the caller, which is handed the tombstone in order with
//! the records, forgets the records before it and marks their rebuilt index entries again
//! ([`Store::forget_records`]).
//!
//! On open the file is scanned from the start and every record is verified
//! (record magic, header check, known kind/format, zero reserved bytes, body
//! within the file, body digest, and for JSON records that the body parses).
//! A record that fails is dropped. If no valid record follows it, it is a torn
//! tail: the file is truncated back to the end of the last good record so new
//! appends start clean ([`Recovered::truncated_bytes`]). Otherwise the scan
//! resynchronises at the next offset holding the record magic *and* a record
//! that verifies, skipping only the bad bytes ([`Recovered::dropped_records`]
//! counts each skipped region; the bytes stay in the file and are skipped
//! again on every open). Each drop and truncation is logged with
//! `log::warn!` including byte offsets. A file that is empty, or shorter than
//! the file header and a prefix of it (a torn creation), is treated as new.
//! A file with any other header is refused with `InvalidData` naming the path
//! and is never written to.
//!
//! # Durability policy
//!
//! Every [`Store::put_blobs`] call writes all of its new records with a single
//! positioned `write_all` at the end of the log, and [`Store::append_records`]
//! does the same for its records; both return only after the data is on stable
//! storage (`sync_data`). Syncs are shared (group commit): the write happens
//! under the store lock, the sync without it, and one sync covers every writer
//! whose bytes were written before it started, so concurrent writers pay for one
//! sync instead of queueing for one each, and readers are not blocked by a sync.
//! The in-memory index (and the `.idx` file) is updated only after the sync
//! covering the record succeeded. If a write fails, the file is cut back to
//! where that write began; if a sync fails, the file is cut back to the end of
//! the last successful sync and every writer whose bytes were not yet synced
//! gets the error, so a failed call leaves nothing behind that the index refers
//! to, and nothing unsynced is ever acknowledged. When the file
//! is created (or found empty), the header is written and synced and the
//! parent directory is fsynced so the new directory entry survives a crash.
//! Truncating a torn tail on open is also synced. Only one process may have a
//! log file open at a time: [`Store::open_with`] takes an exclusive `flock` on it before reading
//! anything, held as long as the store lives, and refuses (naming the pid that holds it, when
//! `/proc/locks` tells) when another store holds it. The file and its `.idx` are created 0600.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha512};

use crate::intern::{parse_digest, Cid, CidMap, DIGEST_LEN};

/// How the bytes of a blob were serialized, when known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Dill,
    Json,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Dill => "dill",
            Format::Json => "json",
        }
    }
}

/// The kind of a JSON record in the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    CallRecord,
    History,
    /// A change of the breakpoint settings (`service::settings`): a JSON object with a
    /// [`SETTINGS_KEY`] key and no `"id"` (stored with the history entries' kind byte; see the
    /// module doc).
    Settings,
}

/// The key that marks a settings record's body.
pub const SETTINGS_KEY: &str = "settings";

/// Whether a JSON body of kind 3 is a settings record rather than a history entry.
fn is_settings(v: &serde_json::Value) -> bool {
    v.as_object()
        .is_some_and(|m| m.contains_key(SETTINGS_KEY) && !m.contains_key("id"))
}

/// A blob to store; its `cid` has already been verified by the caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewBlob {
    pub cid: Cid,
    pub bytes: Vec<u8>,
    pub format: Option<Format>,
}

/// A stored blob.
#[derive(Clone, Debug)]
pub struct Blob {
    pub cid: Cid,
    pub bytes: Arc<[u8]>,
    pub format: Option<Format>,
    pub stored_at: f64,
}

/// Metadata of a stored blob.
#[derive(Clone, Debug)]
pub struct BlobMeta {
    pub cid: Cid,
    pub size: u64,
    pub format: Option<Format>,
    pub stored_at: f64,
}

/// What the index keeps of a JSON record besides its place, chosen by the caller (opaque to
/// the store): two 32-bit keys and an 8-bit tag that listings filter the on-disk index by
/// before reading any record, and the caller's sequence number of the record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexKey {
    pub a: u32,
    pub b: u32,
    pub tag: u8,
    pub seq: u64,
}

/// What `open` found in an existing file.
#[derive(Debug, Default)]
pub struct Recovered {
    /// JSON records, in append order (only from [`Store::open`]; [`Store::open_with`] hands
    /// them to its callback instead).
    pub records: Vec<(RecordKind, serde_json::Value)>,
    /// The file's format version before it was opened (older files are upgraded).
    pub version: u32,
    /// Distinct blobs indexed.
    pub blobs: usize,
    /// Corrupt records skipped (each region of bad bytes followed by a valid
    /// record counts once).
    pub dropped_records: usize,
    /// Bytes of torn or corrupt tail cut off the end of the file.
    pub truncated_bytes: u64,
}

// ---------------------------------------------------------------------------
// On-disk format constants (see the module doc for the layout).
//
//   file header : "CDLSTORE" | version u32 | reserved u32            (16 B)
//   record      : magic[4] | kind u8 | format u8 | reserved[2]
//                 | stored_at f64 | body_len u64 | check[8]          (32 B)
//                 | SHA-512(body)                                    (64 B)
//                 | body                                    (body_len B)
//   check       = SHA-512(record header bytes 0..24)[0..8]
// ---------------------------------------------------------------------------

const FILE_MAGIC: [u8; 8] = *b"CDLSTORE";
/// Version 2: call records leave out rendered values and history entries hold their call
/// record; the record envelope is unchanged, so version 1 files are read and upgraded.
const FILE_VERSION: u32 = 2;
const OLDEST_VERSION: u32 = 1;
/// One entry of the on-disk index: record offset (48 bits), kind, the key's tag, two keys, the
/// sequence number.
const INDEX_ENTRY_LEN: usize = 24;
/// Index entries read at a time when a listing walks the index backwards.
const INDEX_CHUNK: usize = 4096;
const FILE_HEADER_LEN: u64 = 16;

const RECORD_MAGIC: [u8; 4] = [0xCD, 0x5E, 0xC0, 0x7D];
const RECORD_HEADER_LEN: usize = 32;
const RECORD_PREFIX_LEN: u64 = (RECORD_HEADER_LEN + DIGEST_LEN) as u64;

const KIND_BLOB: u8 = 1;
const KIND_CALL_RECORD: u8 = 2;
const KIND_HISTORY: u8 = 3;
/// Settings records in the `.idx` file only (on disk they have `KIND_HISTORY`).
const INDEX_KIND_SETTINGS: u8 = 4;
/// Records forgotten (`Store::forget`), in the `.idx` file only: no listing asks for this kind.
const INDEX_KIND_FORGOTTEN: u8 = 5;

const FORMAT_NONE: u8 = 0;
const FORMAT_DILL: u8 = 1;
const FORMAT_JSON: u8 = 2;

/// Chunk size for streaming reads while scanning.
const SCAN_CHUNK: usize = 64 * 1024;

fn file_header() -> [u8; FILE_HEADER_LEN as usize] {
    let mut h = [0u8; FILE_HEADER_LEN as usize];
    h[0..8].copy_from_slice(&FILE_MAGIC);
    h[8..12].copy_from_slice(&FILE_VERSION.to_le_bytes());
    h
}

fn format_to_byte(f: Option<Format>) -> u8 {
    match f {
        None => FORMAT_NONE,
        Some(Format::Dill) => FORMAT_DILL,
        Some(Format::Json) => FORMAT_JSON,
    }
}

fn format_from_byte(b: u8) -> Option<Option<Format>> {
    match b {
        FORMAT_NONE => Some(None),
        FORMAT_DILL => Some(Some(Format::Dill)),
        FORMAT_JSON => Some(Some(Format::Json)),
        _ => None,
    }
}

/// The kind byte of a record in the log.
fn kind_to_byte(k: RecordKind) -> u8 {
    match k {
        RecordKind::CallRecord => KIND_CALL_RECORD,
        RecordKind::History | RecordKind::Settings => KIND_HISTORY,
    }
}

/// The kind byte of a record's entry in the `.idx` file.
fn index_kind(k: RecordKind) -> u8 {
    match k {
        RecordKind::Settings => INDEX_KIND_SETTINGS,
        other => kind_to_byte(other),
    }
}

fn header_check(first24: &[u8]) -> [u8; 8] {
    let d = Sha512::digest(first24);
    let mut c = [0u8; 8];
    c.copy_from_slice(&d[..8]);
    c
}

/// Appends one complete record (header, digest, body) to `out`.
fn encode_record(
    out: &mut Vec<u8>,
    kind: u8,
    format: u8,
    stored_at: f64,
    digest: &[u8; DIGEST_LEN],
    body: &[u8],
) {
    let mut h = [0u8; RECORD_HEADER_LEN];
    h[0..4].copy_from_slice(&RECORD_MAGIC);
    h[4] = kind;
    h[5] = format;
    h[8..16].copy_from_slice(&stored_at.to_bits().to_le_bytes());
    h[16..24].copy_from_slice(&(body.len() as u64).to_le_bytes());
    let check = header_check(&h[0..24]);
    h[24..32].copy_from_slice(&check);
    out.extend_from_slice(&h);
    out.extend_from_slice(digest);
    out.extend_from_slice(body);
}

fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn with_path(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

// ---------------------------------------------------------------------------
// Store
// ---------------------------------------------------------------------------

/// Where a blob's bytes live.
enum Loc {
    Memory(Arc<[u8]>),
    /// Body offset and length in the log file.
    Disk {
        offset: u64,
        len: u64,
    },
}

/// One stored blob in the index: 48 bytes, plus the 64-byte digest it shares with the records
/// that name it, plus about 28 bytes in `index`.
struct Entry {
    cid: Cid,
    format: Option<Format>,
    stored_at: f64,
    loc: Loc,
}

impl Entry {
    fn size(&self) -> u64 {
        match &self.loc {
            Loc::Memory(bytes) => bytes.len() as u64,
            Loc::Disk { len, .. } => *len,
        }
    }
}

struct Log {
    path: PathBuf,
    file: Arc<File>,
    /// Logical end of the log: where the next record is written.
    end: u64,
    /// Everything before this offset is on stable storage.
    synced: u64,
    /// A writer is running `sync_data` (without the lock) for everything written before it
    /// started.
    syncing: bool,
    /// Counts failed syncs: a writer whose bytes were written in an earlier generation lost
    /// them to the cut-back of a failed sync.
    generation: u64,
    /// The error of the last failed sync.
    failure: String,
}

impl Log {
    fn new(path: &Path, file: File, end: u64) -> Log {
        Log {
            path: path.to_path_buf(),
            file: Arc::new(file),
            end,
            synced: end,
            syncing: false,
            generation: 0,
            failure: String::new(),
        }
    }
}

/// The on-disk index of JSON records (`<db>.idx`): fixed-size entries in append order.
struct Index {
    file: Arc<File>,
    /// Bytes written.
    len: u64,
}

struct State {
    index_file: Option<Index>,
    /// CID → index into `entries`.
    index: CidMap<u32>,
    /// Blobs in insertion order.
    entries: Vec<Entry>,
    /// `None` for the memory backend.
    log: Option<Log>,
}

impl State {
    fn new(log: Option<Log>) -> State {
        State {
            index_file: None,
            index: CidMap::default(),
            entries: Vec::new(),
            log,
        }
    }

    /// Adds an entry unless its CID is present; returns whether it was new.
    fn insert(&mut self, entry: Entry) -> bool {
        let Ok(i) = u32::try_from(self.entries.len()) else {
            return false;
        };
        if !self.index.insert(entry.cid.clone(), i) {
            return false;
        }
        self.entries.push(entry);
        true
    }

    fn find(&self, digest: &[u8; DIGEST_LEN]) -> Option<&Entry> {
        let (_, &i) = self.index.get(digest)?;
        self.entries.get(i as usize)
    }

    /// Drops the blobs named by `cids` (hex CIDs; unknown ones are ignored) from the index and,
    /// in memory, their bytes: how many were present and their bytes.
    fn forget(&mut self, cids: &[&str]) -> (usize, u64) {
        let gone: std::collections::HashSet<[u8; DIGEST_LEN]> = cids
            .iter()
            .filter_map(|c| parse_digest(c))
            .filter(|d| self.index.get(d).is_some())
            .collect();
        if gone.is_empty() {
            return (0, 0);
        }
        let mut bytes = 0;
        self.entries.retain(|e| {
            let drop = gone.contains(e.cid.digest());
            if drop {
                bytes += e.size();
            }
            !drop
        });
        self.entries.shrink_to_fit();
        let mut index = CidMap::default();
        for (i, e) in self.entries.iter().enumerate() {
            index.insert(e.cid.clone(), i as u32);
        }
        self.index = index;
        (gone.len(), bytes)
    }
}

/// The key of a settings record (see [`SETTINGS_KEY`]) that removes objects: `"forget_objects":
/// [cid, ...]`. The store applies it itself, in the log's order, when the file is opened: the
/// objects stored before it are dropped from the index (a copy stored again after it is a new
/// object). Their bytes stay in the file (there is no compaction); no listing or read reaches
/// them again.
pub const FORGET_KEY: &str = "forget_objects";

/// The CIDs a settings record removes ([`FORGET_KEY`]), if it is such a record.
fn forgotten(v: &serde_json::Value) -> Vec<&str> {
    v.get(FORGET_KEY)
        .and_then(serde_json::Value::as_array)
        .map(|a| a.iter().filter_map(serde_json::Value::as_str).collect())
        .unwrap_or_default()
}

/// The content store. See the module documentation.
pub struct Store {
    state: Mutex<State>,
    /// Signalled when a sync of the log ends.
    synced: Condvar,
    durable: bool,
}

impl Store {
    /// A store that lives only in memory.
    pub fn memory() -> Store {
        Store {
            state: Mutex::new(State::new(None)),
            synced: Condvar::new(),
            durable: false,
        }
    }

    /// Opens (creating it and its parent directories if needed) a log file, returning its JSON
    /// records in [`Recovered::records`].
    pub fn open(path: &Path) -> io::Result<(Store, Recovered)> {
        let mut records = Vec::new();
        let (store, mut recovered) = Store::open_with(path, &mut |kind, _, value| {
            records.push((kind, value));
            IndexKey::default()
        })?;
        recovered.records = records;
        Ok((store, recovered))
    }

    /// Opens a log file, handing each JSON record to `on_record` in append order (so they
    /// need not all be in memory at once) and indexing it by the key it returns. The index
    /// (`<path>.idx`) is derived data: it is rebuilt here and never fsynced.
    pub fn open_with(
        path: &Path,
        on_record: &mut dyn FnMut(RecordKind, u64, serde_json::Value) -> IndexKey,
    ) -> io::Result<(Store, Recovered)> {
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        crate::files::create_dirs(&parent).map_err(|e| with_path(&parent, e))?;
        let existed = path.exists();
        let file = crate::files::private_options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| with_path(path, e))?;
        // Before anything is read or the index is rebuilt: one process per file.
        lock(&file, path)?;
        if existed {
            crate::files::warn_if_file_open(path, "the database");
        } else {
            crate::files::restrict(&file).map_err(|e| with_path(path, e))?;
        }
        let len = file.metadata().map_err(|e| with_path(path, e))?.len();

        let mut recovered = Recovered::default();
        let mut state;
        if len < FILE_HEADER_LEN {
            // New, empty, or a torn creation (a prefix of our header).
            let header = file_header();
            let mut present = vec![0u8; len as usize];
            file.read_exact_at(&mut present, 0)
                .map_err(|e| with_path(path, e))?;
            if present[..] != header[..present.len()] {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{}: not a cideldill store file (short file with unknown header)",
                        path.display()
                    ),
                ));
            }
            if len > 0 {
                log::warn!(
                    "store {}: torn file header ({len} bytes); starting a new log",
                    path.display()
                );
                recovered.truncated_bytes = len;
                file.set_len(0).map_err(|e| with_path(path, e))?;
            }
            file.write_all_at(&header, 0)
                .map_err(|e| with_path(path, e))?;
            file.sync_data().map_err(|e| with_path(path, e))?;
            File::open(&parent)
                .and_then(|d| d.sync_all())
                .map_err(|e| with_path(&parent, e))?;
            state = State::new(Some(Log::new(path, file, FILE_HEADER_LEN)));
            let idx_path = index_path(path);
            let idx_file = create_index(&idx_path)?;
            state.index_file = Some(Index {
                file: Arc::new(idx_file),
                len: 0,
            });
        } else {
            let mut header = [0u8; FILE_HEADER_LEN as usize];
            file.read_exact_at(&mut header, 0)
                .map_err(|e| with_path(path, e))?;
            if header[0..8] != FILE_MAGIC {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: not a cideldill store file (bad magic)", path.display()),
                ));
            }
            let mut version = [0u8; 4];
            version.copy_from_slice(&header[8..12]);
            let version = u32::from_le_bytes(version);
            recovered.version = version;
            if !(OLDEST_VERSION..=FILE_VERSION).contains(&version) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{}: unsupported store file version {version} (expected {FILE_VERSION})",
                        path.display()
                    ),
                ));
            }
            state = State::new(None);
            let idx_path = index_path(path);
            let idx_file = create_index(&idx_path)?;
            let mut idx = io::BufWriter::new(idx_file);
            let end = scan(
                &file,
                path,
                len,
                &mut state,
                &mut recovered,
                &mut |at, kind, value| {
                    let key = on_record(kind, at, value);
                    idx.write_all(&index_entry(at, kind, key))
                },
            )
            .map_err(|e| with_path(path, e))?;
            let idx_file = idx
                .into_inner()
                .map_err(|e| with_path(&idx_path, e.into_error()))?;
            let idx_len = idx_file
                .metadata()
                .map_err(|e| with_path(&idx_path, e))?
                .len();
            state.index_file = Some(Index {
                file: Arc::new(idx_file),
                len: idx_len,
            });
            if version < FILE_VERSION {
                // The records of this version read the older ones too: upgrade in place.
                file.write_all_at(&FILE_VERSION.to_le_bytes(), 8)
                    .and_then(|()| file.sync_data())
                    .map_err(|e| with_path(path, e))?;
                log::info!(
                    "store {}: upgraded from format version {version} to {FILE_VERSION}",
                    path.display()
                );
            }
            if end < len {
                file.set_len(end).map_err(|e| with_path(path, e))?;
                file.sync_data().map_err(|e| with_path(path, e))?;
                recovered.truncated_bytes = len - end;
            }
            state.log = Some(Log::new(path, file, end));
        }
        recovered.blobs = state.entries.len();
        Ok((
            Store {
                state: Mutex::new(state),
                synced: Condvar::new(),
                durable: true,
            },
            recovered,
        ))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update of `State` completes without panicking once begun, so a
        // poisoned lock still guards a consistent state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether records are written to a file (false for the memory backend).
    pub fn is_durable(&self) -> bool {
        self.durable
    }

    /// The log file's path; `None` for the memory backend.
    pub fn path(&self) -> Option<PathBuf> {
        self.lock().log.as_ref().map(|l| l.path.clone())
    }

    pub fn contains(&self, cid: &str) -> bool {
        parse_digest(cid).is_some_and(|d| self.contains_digest(&d))
    }

    pub fn contains_digest(&self, digest: &[u8; DIGEST_LEN]) -> bool {
        self.lock().index.get(digest).is_some()
    }

    /// The stored copy of a CID, shared with the index.
    pub fn cid(&self, digest: &[u8; DIGEST_LEN]) -> Option<Cid> {
        self.lock().index.get(digest).map(|(c, _)| c.clone())
    }

    pub fn get(&self, cid: &str) -> io::Result<Option<Blob>> {
        crate::lock_rule::assert_unlocked("reading an object");
        match parse_digest(cid) {
            Some(d) => self.get_digest(&d),
            None => Ok(None),
        }
    }

    pub fn get_digest(&self, digest: &[u8; DIGEST_LEN]) -> io::Result<Option<Blob>> {
        crate::lock_rule::assert_unlocked("reading an object");
        let (cid, format, stored_at, offset, len, file) = {
            let st = self.lock();
            let Some(e) = st.find(digest) else {
                return Ok(None);
            };
            match &e.loc {
                Loc::Memory(bytes) => {
                    return Ok(Some(Blob {
                        cid: e.cid.clone(),
                        bytes: Arc::clone(bytes),
                        format: e.format,
                        stored_at: e.stored_at,
                    }));
                }
                Loc::Disk { offset, len } => {
                    let Some(log) = st.log.as_ref() else {
                        return Err(io::Error::other("store: disk entry without a log file"));
                    };
                    (
                        e.cid.clone(),
                        e.format,
                        e.stored_at,
                        *offset,
                        *len,
                        Arc::clone(&log.file),
                    )
                }
            }
        };
        // Committed bytes never change, so read without holding the lock.
        let n = usize::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::OutOfMemory, "store: blob too large"))?;
        let mut buf = vec![0u8; n];
        file.read_exact_at(&mut buf, offset)?;
        Ok(Some(Blob {
            cid,
            bytes: Arc::from(buf),
            format,
            stored_at,
        }))
    }

    /// Stores the blobs not yet present (dedupe by CID; a blob already present
    /// keeps its first format and time), durably: all new records of one call
    /// are written with one write and one fsync (`sync_data`) before it
    /// returns. Returns how many were new.
    pub fn put_blobs(&self, blobs: Vec<NewBlob>, now: f64) -> io::Result<usize> {
        crate::lock_rule::assert_unlocked("writing objects");
        let mut st = self.lock();
        let mut seen: CidMap<()> = CidMap::default();
        let fresh: Vec<NewBlob> = blobs
            .into_iter()
            .filter(|b| st.index.get(b.cid.digest()).is_none() && seen.insert(b.cid.clone(), ()))
            .collect();
        if fresh.is_empty() {
            return Ok(0);
        }
        let located: Vec<(Cid, Option<Format>, Loc)> = if st.log.is_none() {
            // Memory backend: keep the bytes.
            fresh
                .into_iter()
                .map(|b| (b.cid, b.format, Loc::Memory(Arc::from(b.bytes))))
                .collect()
        } else {
            let total: usize = fresh
                .iter()
                .map(|b| RECORD_PREFIX_LEN as usize + b.bytes.len())
                .sum();
            let mut buf = Vec::with_capacity(total);
            let mut starts = Vec::with_capacity(fresh.len());
            for b in &fresh {
                starts.push(buf.len() as u64 + RECORD_PREFIX_LEN);
                encode_record(
                    &mut buf,
                    KIND_BLOB,
                    format_to_byte(b.format),
                    now,
                    b.cid.digest(),
                    &b.bytes,
                );
            }
            let base;
            (st, base) = self.append_durably(st, &buf)?;
            fresh
                .into_iter()
                .zip(starts)
                .map(|(b, start)| {
                    let loc = Loc::Disk {
                        offset: base + start,
                        len: b.bytes.len() as u64,
                    };
                    (b.cid, b.format, loc)
                })
                .collect()
        };
        let mut count = 0;
        for (cid, format, loc) in located {
            // A blob another writer stored while this one waited for its sync keeps that
            // first copy (this one is a duplicate record in the log, skipped on open).
            if st.index.get(cid.digest()).is_some() {
                continue;
            }
            st.insert(Entry {
                cid,
                format,
                stored_at: now,
                loc,
            });
            count += 1;
        }
        Ok(count)
    }

    /// Appends one JSON record durably (written and fsynced before returning).
    /// The memory backend accepts and discards it.
    pub fn append_record(&self, kind: RecordKind, record: &serde_json::Value) -> io::Result<()> {
        crate::lock_rule::assert_unlocked("writing a record");
        self.append_records(&[(kind, record, IndexKey::default())])
            .map(|_| ())
    }

    /// Appends JSON records durably with one write and one fsync, in order, and indexes them
    /// by their keys; answers the offset of each (for [`Store::read_record`]). The memory
    /// backend accepts and discards them, and answers no offsets.
    pub fn append_records(
        &self,
        records: &[(RecordKind, &serde_json::Value, IndexKey)],
    ) -> io::Result<Vec<u64>> {
        crate::lock_rule::assert_unlocked("writing records");
        if !self.durable || records.is_empty() {
            return Ok(Vec::new());
        }
        // Serialising and hashing happen before the lock is taken again.
        let now = now_unix();
        let mut buf = Vec::new();
        let mut starts = Vec::with_capacity(records.len());
        for (kind, record, _) in records {
            if (*kind == RecordKind::Settings)
                != (kind_to_byte(*kind) == KIND_HISTORY && is_settings(record))
            {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("store: a {kind:?} record must be told apart by its body"),
                ));
            }
            starts.push(buf.len() as u64);
            let body = serde_json::to_vec(record)?;
            let digest: [u8; DIGEST_LEN] = Sha512::digest(&body).into();
            encode_record(
                &mut buf,
                kind_to_byte(*kind),
                FORMAT_NONE,
                now,
                &digest,
                &body,
            );
        }
        let st = self.lock();
        if st.log.is_none() {
            return Ok(Vec::new());
        }
        let (mut st, base) = self.append_durably(st, &buf)?;
        let offsets: Vec<u64> = starts.iter().map(|s| base + s).collect();
        if let Some(index) = st.index_file.as_mut() {
            let mut entries = Vec::with_capacity(records.len() * INDEX_ENTRY_LEN);
            for ((kind, _, key), at) in records.iter().zip(&offsets) {
                entries.extend_from_slice(&index_entry(*at, *kind, *key));
            }
            // Derived data, rebuilt at every open: written, never fsynced.
            match index.file.write_all_at(&entries, index.len) {
                Ok(()) => index.len += entries.len() as u64,
                Err(e) => log::error!("store index: write failed: {e}"),
            }
        }
        Ok(offsets)
    }

    /// Reads the JSON record that starts at `offset` (an offset from the index).
    pub fn read_record(&self, offset: u64) -> io::Result<(RecordKind, serde_json::Value)> {
        crate::lock_rule::assert_unlocked("reading a record");
        let (file, len) = {
            let st = self.lock();
            let log = st
                .log
                .as_ref()
                .ok_or_else(|| io::Error::other("store: no log file"))?;
            (Arc::clone(&log.file), log.end)
        };
        match verify_at(&file, offset, len)? {
            Some((Parsed::Json(kind, value), _)) => Ok((kind, value)),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("store: no JSON record at offset {offset}"),
            )),
        }
    }

    /// The index file and its length now (no index: none).
    fn index_snapshot(&self) -> Option<(Arc<File>, u64)> {
        let st = self.lock();
        st.index_file.as_ref().map(|i| (Arc::clone(&i.file), i.len))
    }

    /// Walks the index from the newest entry back: the offsets of the records of `kind` whose
    /// key `matches`, skipping the first `skip` matches and keeping `take`, and how many match
    /// in all. Reads the index file, not the records.
    pub fn index_page(
        &self,
        kind: RecordKind,
        matches: &dyn Fn(IndexKey) -> bool,
        skip: usize,
        take: usize,
    ) -> io::Result<(Vec<u64>, usize)> {
        crate::lock_rule::assert_unlocked("reading the index");
        let Some((file, len)) = self.index_snapshot() else {
            return Ok((Vec::new(), 0));
        };
        let want = index_kind(kind);
        let mut total = 0;
        let mut page = Vec::new();
        let mut buf = vec![0u8; INDEX_CHUNK * INDEX_ENTRY_LEN];
        let mut end = len - len % INDEX_ENTRY_LEN as u64;
        while end > 0 {
            let start = end.saturating_sub(buf.len() as u64);
            let chunk = &mut buf[..(end - start) as usize];
            file.read_exact_at(chunk, start)?;
            for e in chunk.chunks_exact(INDEX_ENTRY_LEN).rev() {
                let (offset, kind, key) = parse_index_entry(e);
                if kind == want && matches(key) {
                    if total >= skip && page.len() < take {
                        page.push(offset);
                    }
                    total += 1;
                }
            }
            end = start;
        }
        Ok((page, total))
    }

    /// Walks the index backwards from entry `before` (exclusive; `None`: from the newest): the
    /// offsets of up to `take` records of `kind` whose key `matches`, newest first, and the
    /// entry to continue from (0 when the walk reached the oldest entry). A cursor over every
    /// record, in bounded steps; entries appended meanwhile are after `before` and not seen.
    pub fn index_before(
        &self,
        kind: RecordKind,
        matches: &dyn Fn(IndexKey) -> bool,
        before: Option<u64>,
        take: usize,
    ) -> io::Result<(Vec<u64>, u64)> {
        crate::lock_rule::assert_unlocked("reading the index");
        let Some((file, len)) = self.index_snapshot() else {
            return Ok((Vec::new(), 0));
        };
        let newest = len / INDEX_ENTRY_LEN as u64;
        let mut next = before.map_or(newest, |b| b.min(newest));
        let want = index_kind(kind);
        let mut page = Vec::new();
        let mut buf = vec![0u8; INDEX_CHUNK * INDEX_ENTRY_LEN];
        while next > 0 && page.len() < take {
            let first = next.saturating_sub(INDEX_CHUNK as u64);
            let chunk = &mut buf[..((next - first) as usize) * INDEX_ENTRY_LEN];
            file.read_exact_at(chunk, first * INDEX_ENTRY_LEN as u64)?;
            for (i, e) in chunk.chunks_exact(INDEX_ENTRY_LEN).enumerate().rev() {
                let (offset, kind, key) = parse_index_entry(e);
                if kind == want && matches(key) {
                    page.push(offset);
                    if page.len() == take {
                        return Ok((page, first + i as u64));
                    }
                }
            }
            next = first;
        }
        Ok((page, next))
    }

    /// Removes records and objects: writes `tombstone` (a settings record; with a database file,
    /// durably, before anything changes), then drops the objects it names under
    /// [`FORGET_KEY`] from the index (in memory, with their bytes; in a file, their bytes
    /// stay there, unreachable) and marks the index entries of the JSON records at `offsets`
    /// as forgotten, so no listing walks them again (the `.idx` file is rebuilt at every open;
    /// the caller forgets the records again when it reads the tombstone back). Answers how many
    /// objects were dropped, their bytes, and where the tombstone was written (`None` for the
    /// memory backend).
    pub fn forget(
        &self,
        tombstone: &serde_json::Value,
        offsets: &[u64],
    ) -> io::Result<(usize, u64, Option<u64>)> {
        if !is_settings(tombstone) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "store: a tombstone must be a settings record",
            ));
        }
        let mut at = None;
        if self.durable {
            at = self
                .append_records(&[(RecordKind::Settings, tombstone, IndexKey::default())])?
                .first()
                .copied();
        }
        let (n, bytes) = self.lock().forget(&forgotten(tombstone));
        if let Err(e) = self.forget_records(offsets) {
            log::error!("store index: cannot mark forgotten records: {e}");
        }
        Ok((n, bytes, at))
    }

    /// Marks the index entries of the JSON records at `offsets` as forgotten: listings and
    /// walks of the index skip them. Answers how many were marked.
    pub fn forget_records(&self, offsets: &[u64]) -> io::Result<usize> {
        if offsets.is_empty() {
            return Ok(0);
        }
        let mut sorted = offsets.to_vec();
        sorted.sort_unstable();
        let st = self.lock();
        let Some(index) = st.index_file.as_ref() else {
            return Ok(0);
        };
        let (file, len) = (Arc::clone(&index.file), index.len);
        let mut buf = vec![0u8; INDEX_CHUNK * INDEX_ENTRY_LEN];
        let mut start = 0u64;
        let mut marked = 0;
        let whole = len - len % INDEX_ENTRY_LEN as u64;
        while start < whole {
            let end = (start + buf.len() as u64).min(whole);
            let chunk = &mut buf[..(end - start) as usize];
            file.read_exact_at(chunk, start)?;
            let mut changed = false;
            for e in chunk.chunks_exact_mut(INDEX_ENTRY_LEN) {
                let (offset, kind, _) = parse_index_entry(e);
                if kind != INDEX_KIND_FORGOTTEN && sorted.binary_search(&offset).is_ok() {
                    e[6] = INDEX_KIND_FORGOTTEN;
                    changed = true;
                    marked += 1;
                }
            }
            if changed {
                file.write_all_at(chunk, start)?;
            }
            start = end;
        }
        Ok(marked)
    }

    /// Metadata of every blob, in insertion order.
    pub fn list(&self) -> Vec<BlobMeta> {
        crate::lock_rule::assert_unlocked("listing objects");
        self.lock()
            .entries
            .iter()
            .map(|e| BlobMeta {
                cid: e.cid.clone(),
                size: e.size(),
                format: e.format,
                stored_at: e.stored_at,
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().entries.is_empty()
    }
}

/// Creates (or empties) an index file, readable and writable, 0600 (it is derived data: an
/// index left by an older server with a wider mode is narrowed too).
fn create_index(path: &Path) -> io::Result<File> {
    let file = crate::files::private_options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(|e| with_path(path, e))?;
    crate::files::restrict(&file).map_err(|e| with_path(path, e))?;
    Ok(file)
}

/// Takes the store's exclusive lock on its open log file, or says who holds it. A lock taken
/// by this process can be held for an instant by a child being spawned (the duplicate of the
/// descriptor lives between `fork` and `exec`), so a refusal is retried for up to a second
/// before it is taken for another server's.
fn lock(file: &File, path: &Path) -> io::Result<()> {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        if crate::sys::try_lock_exclusive(file).map_err(|e| with_path(path, e))? {
            return Ok(());
        }
        if std::time::Instant::now() >= until {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let holder = match lock_holder(file) {
        Some(pid) => format!(" (pid {pid})"),
        None => String::new(),
    };
    Err(io::Error::new(
        io::ErrorKind::WouldBlock,
        format!(
            "{} is in use by another cideldill-server{holder}: two servers appending to one \
             database lose each other's records; stop that server, or give this one another \
             --db (or --memory)",
            path.display()
        ),
    ))
}

/// The pid holding a `flock` on `file`, from `/proc/locks` (Linux; `None` elsewhere or when
/// it cannot be told).
fn lock_holder(file: &File) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let inode = file.metadata().ok()?.ino();
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" ("->" marks a waiter).
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(1) != Some(&"FLOCK") || fields.contains(&"->") {
            return None;
        }
        let ino: u64 = fields.get(5)?.rsplit(':').next()?.parse().ok()?;
        (ino == inode)
            .then(|| fields.get(4)?.parse().ok())
            .flatten()
    })
}

fn index_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".idx");
    PathBuf::from(p)
}

fn index_entry(offset: u64, kind: RecordKind, key: IndexKey) -> [u8; INDEX_ENTRY_LEN] {
    let mut e = [0u8; INDEX_ENTRY_LEN];
    e[0..6].copy_from_slice(&offset.to_le_bytes()[0..6]);
    e[6] = index_kind(kind);
    e[7] = key.tag;
    e[8..12].copy_from_slice(&key.a.to_le_bytes());
    e[12..16].copy_from_slice(&key.b.to_le_bytes());
    e[16..24].copy_from_slice(&key.seq.to_le_bytes());
    e
}

fn parse_index_entry(e: &[u8]) -> (u64, u8, IndexKey) {
    let mut o = [0u8; 8];
    o[0..6].copy_from_slice(&e[0..6]);
    let mut a = [0u8; 4];
    let mut b = [0u8; 4];
    a.copy_from_slice(&e[8..12]);
    b.copy_from_slice(&e[12..16]);
    let mut seq = [0u8; 8];
    seq.copy_from_slice(&e[16..24]);
    (
        u64::from_le_bytes(o),
        e[6],
        IndexKey {
            a: u32::from_le_bytes(a),
            b: u32::from_le_bytes(b),
            tag: e[7],
            seq: u64::from_le_bytes(seq),
        },
    )
}

impl Store {
    /// Writes `buf` at the end of the log and returns once it is on stable storage, with the
    /// offset it was written at. Group commit: the write happens under the lock, the
    /// `sync_data` without it, and one sync covers every writer that wrote before it started
    /// (a writer that finds a sync running waits for it, then syncs what is left if its own
    /// bytes were written too late for it). A failed write is cut back at once; a failed sync
    /// cuts the log back to its last synced end and fails every writer whose bytes were not
    /// synced yet, so nothing unsynced is ever acknowledged or indexed.
    fn append_durably<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        buf: &[u8],
    ) -> io::Result<(MutexGuard<'a, State>, u64)> {
        let log = st
            .log
            .as_mut()
            .ok_or_else(|| io::Error::other("store: no log file"))?;
        let start = log.end;
        if let Err(e) = log.file.write_all_at(buf, start) {
            cut_back(log, start);
            return Err(with_path(&log.path, e));
        }
        log.end += buf.len() as u64;
        let (mine, generation) = (log.end, log.generation);
        loop {
            let Some(log) = st.log.as_mut() else {
                return Err(io::Error::other("store: no log file"));
            };
            if log.generation != generation {
                return Err(with_path(
                    &log.path,
                    io::Error::other(format!("sync failed: {}", log.failure)),
                ));
            }
            if log.synced >= mine {
                return Ok((st, start));
            }
            if log.syncing {
                st = self.synced.wait(st).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            log.syncing = true;
            let (file, upto) = (Arc::clone(&log.file), log.end);
            drop(st);
            let result = file.sync_data();
            st = self.lock();
            if let Some(log) = st.log.as_mut() {
                log.syncing = false;
                match result {
                    Ok(()) => log.synced = log.synced.max(upto),
                    Err(e) => {
                        log::error!("store {}: sync failed: {e}", log.path.display());
                        log.failure = e.to_string();
                        log.generation += 1;
                        let synced = log.synced;
                        cut_back(log, synced);
                    }
                }
            }
            self.synced.notify_all();
        }
    }
}

/// Cuts the log back to `end` (best effort) so no partial or unsynced record lingers.
fn cut_back(log: &mut Log, end: u64) {
    if let Err(e) = log.file.set_len(end) {
        log::warn!(
            "store {}: could not cut back to {end} after a failed append: {e}",
            log.path.display()
        );
    }
    log.end = end;
}

// ---------------------------------------------------------------------------
// Scanning and verification on open
// ---------------------------------------------------------------------------

/// A record that verified.
enum Parsed {
    Blob {
        cid: Cid,
        format: Option<Format>,
        stored_at: f64,
        body_offset: u64,
        body_len: u64,
    },
    Json(RecordKind, serde_json::Value),
}

/// Scans the records after the file header, filling `state` and `recovered`.
/// Returns the end of the last good record (where the file should end).
fn scan(
    file: &File,
    path: &Path,
    len: u64,
    state: &mut State,
    recovered: &mut Recovered,
    on_json: &mut dyn FnMut(u64, RecordKind, serde_json::Value) -> io::Result<()>,
) -> io::Result<u64> {
    let mut pos = FILE_HEADER_LEN;
    while pos < len {
        let (at, parsed, end) = match verify_at(file, pos, len)? {
            Some((parsed, end)) => (pos, parsed, end),
            None => match resync(file, pos + 1, len)? {
                Some((q, parsed, end)) => {
                    log::warn!(
                        "store {}: dropped corrupt record(s) at bytes {pos}..{q} ({} bytes); \
                         resynchronised at offset {q}",
                        path.display(),
                        q - pos
                    );
                    recovered.dropped_records += 1;
                    (q, parsed, end)
                }
                None => {
                    log::warn!(
                        "store {}: torn or corrupt tail at bytes {pos}..{len} ({} bytes); \
                         truncating the file to {pos}",
                        path.display(),
                        len - pos
                    );
                    return Ok(pos);
                }
            },
        };
        match parsed {
            Parsed::Blob {
                cid,
                format,
                stored_at,
                body_offset,
                body_len,
            } => {
                let new = state.insert(Entry {
                    cid,
                    format,
                    stored_at,
                    loc: Loc::Disk {
                        offset: body_offset,
                        len: body_len,
                    },
                });
                if !new {
                    log::debug!(
                        "store {}: duplicate blob record at offset {at}; keeping the first",
                        path.display()
                    );
                }
            }
            Parsed::Json(kind, value) => {
                if kind == RecordKind::Settings {
                    state.forget(&forgotten(&value));
                }
                on_json(at, kind, value)?
            }
        }
        pos = end;
    }
    Ok(pos)
}

/// Searches from `from` for the next offset holding the record magic and a
/// record that verifies.
fn resync(file: &File, mut from: u64, len: u64) -> io::Result<Option<(u64, Parsed, u64)>> {
    while let Some(q) = find_magic(file, from, len)? {
        if let Some((parsed, end)) = verify_at(file, q, len)? {
            return Ok(Some((q, parsed, end)));
        }
        from = q + 1;
    }
    Ok(None)
}

/// The first offset `>= from` where `RECORD_MAGIC` starts, if any.
fn find_magic(file: &File, mut from: u64, len: u64) -> io::Result<Option<u64>> {
    let m = RECORD_MAGIC.len() as u64;
    let mut buf = vec![0u8; SCAN_CHUNK];
    while from.saturating_add(m) <= len {
        let n = usize::try_from((len - from).min(SCAN_CHUNK as u64)).unwrap_or(SCAN_CHUNK);
        let chunk = &mut buf[..n];
        file.read_exact_at(chunk, from)?;
        if let Some(i) = chunk
            .windows(RECORD_MAGIC.len())
            .position(|w| w == RECORD_MAGIC)
        {
            return Ok(Some(from + i as u64));
        }
        // Overlap so a magic straddling two chunks is still found.
        from += (n as u64).saturating_sub(m - 1).max(1);
    }
    Ok(None)
}

/// Verifies the record at `pos`. `Ok(None)` means it does not verify; `Err`
/// is only for real I/O errors.
fn verify_at(file: &File, pos: u64, len: u64) -> io::Result<Option<(Parsed, u64)>> {
    let Some(body_offset) = pos.checked_add(RECORD_PREFIX_LEN) else {
        return Ok(None);
    };
    if body_offset > len {
        return Ok(None);
    }
    let mut prefix = [0u8; RECORD_PREFIX_LEN as usize];
    file.read_exact_at(&mut prefix, pos)?;
    let (h, digest) = prefix.split_at(RECORD_HEADER_LEN);
    if h[0..4] != RECORD_MAGIC || h[24..32] != header_check(&h[0..24]) || h[6..8] != [0, 0] {
        return Ok(None);
    }
    let mut f8 = [0u8; 8];
    f8.copy_from_slice(&h[8..16]);
    let stored_at = f64::from_bits(u64::from_le_bytes(f8));
    f8.copy_from_slice(&h[16..24]);
    let body_len = u64::from_le_bytes(f8);
    let Some(end) = body_offset.checked_add(body_len) else {
        return Ok(None);
    };
    if end > len {
        return Ok(None);
    }
    let Some(format) = format_from_byte(h[5]) else {
        return Ok(None);
    };
    let kind = match h[4] {
        KIND_BLOB => None,
        KIND_CALL_RECORD => Some(RecordKind::CallRecord),
        KIND_HISTORY => Some(RecordKind::History),
        _ => return Ok(None),
    };
    match kind {
        None => {
            // Stream the body through the hash: blobs may be large.
            let mut hasher = Sha512::new();
            let mut buf =
                vec![0u8; SCAN_CHUNK.min(usize::try_from(body_len).unwrap_or(SCAN_CHUNK))];
            let mut off = body_offset;
            while off < end {
                let n = usize::try_from((end - off).min(buf.len() as u64)).unwrap_or(buf.len());
                file.read_exact_at(&mut buf[..n], off)?;
                hasher.update(&buf[..n]);
                off += n as u64;
            }
            if hasher.finalize()[..] != digest[..] {
                return Ok(None);
            }
            Ok(Some((
                Parsed::Blob {
                    cid: Cid::from_digest(
                        digest
                            .try_into()
                            .map_err(|_| io::Error::other("short digest"))?,
                    ),
                    format,
                    stored_at,
                    body_offset,
                    body_len,
                },
                end,
            )))
        }
        Some(kind) => {
            if format.is_some() {
                return Ok(None);
            }
            let Ok(n) = usize::try_from(body_len) else {
                return Ok(None);
            };
            let mut body = vec![0u8; n];
            file.read_exact_at(&mut body, body_offset)?;
            if Sha512::digest(&body)[..] != digest[..] {
                return Ok(None);
            }
            match serde_json::from_slice(&body) {
                Ok(value) => {
                    let kind = if kind == RecordKind::History && is_settings(&value) {
                        RecordKind::Settings
                    } else {
                        kind
                    };
                    Ok(Some((Parsed::Json(kind, value), end)))
                }
                Err(_) => Ok(None),
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests;
