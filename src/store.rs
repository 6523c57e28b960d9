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
        let (file, len) = {
            let st = self.lock();
            match st.index_file.as_ref() {
                Some(i) => (Arc::clone(&i.file), i.len),
                None => return Ok((Vec::new(), 0)),
            }
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
        let (file, len) = {
            let st = self.lock();
            match st.index_file.as_ref() {
                Some(i) => (Arc::clone(&i.file), i.len),
                None => return Ok((Vec::new(), 0)),
            }
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
mod tests {
    use super::*;
    use serde_json::json;
    use std::fs::OpenOptions;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A unique directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> TempDir {
            static N: AtomicU64 = AtomicU64::new(0);
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            let dir = std::env::temp_dir().join(format!(
                "cideldill-store-test-{tag}-{}-{}-{nanos}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&dir).expect("create temp dir");
            TempDir(dir)
        }

        fn file(&self, name: &str) -> PathBuf {
            self.0.join(name)
        }

        /// Puts `bytes` into this dir's scratch case file and returns its
        /// path. The file is rewritten in place (write, then `set_len`)
        /// rather than recreated: on ext4, truncating to zero right after a
        /// sync, or unlinking many fresh files, costs milliseconds each.
        fn case(&self, bytes: &[u8]) -> PathBuf {
            let path = self.file("case.log");
            let file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .expect("open case file");
            file.write_all_at(bytes, 0).expect("write case");
            file.set_len(bytes.len() as u64).expect("size case");
            path
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn cid_of(bytes: &[u8]) -> String {
        crate::ids::hex(&Sha512::digest(bytes))
    }

    fn nb(bytes: &[u8], format: Option<Format>) -> NewBlob {
        NewBlob {
            cid: Cid::parse(&cid_of(bytes)).expect("a digest"),
            bytes: bytes.to_vec(),
            format,
        }
    }

    fn bytes_of(store: &Store, cid: &str) -> Vec<u8> {
        store
            .get(cid)
            .expect("get")
            .expect("blob present")
            .bytes
            .to_vec()
    }

    /// Every blob a store lists can be read back and hashes to its CID.
    fn assert_all_blobs_verify(store: &Store) {
        for meta in store.list() {
            let blob = store
                .get(&meta.cid.hex())
                .expect("get")
                .expect("listed blob");
            assert_eq!(cid_of(&blob.bytes), meta.cid.hex());
            assert_eq!(blob.bytes.len() as u64, meta.size);
        }
    }

    /// Tiny deterministic PRNG (xorshift64*) for fuzzing.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn bytes(&mut self, n: usize) -> Vec<u8> {
            (0..n).map(|_| self.next() as u8).collect()
        }
    }

    fn check_basic_round_trip(store: &Store) {
        assert!(store.is_empty());
        let a = nb(b"alpha", Some(Format::Dill));
        let b = nb(b"beta", Some(Format::Json));
        let c = nb(b"", None);
        let (ca, cb, cc) = (a.cid.hex(), b.cid.hex(), c.cid.hex());
        assert_eq!(store.put_blobs(vec![a, b, c], 10.0).expect("put"), 3);
        assert_eq!(store.len(), 3);
        assert!(store.contains(&ca) && store.contains(&cb) && store.contains(&cc));
        assert!(!store.contains(&cid_of(b"missing")));
        assert!(store.get(&cid_of(b"missing")).expect("get").is_none());

        let blob = store.get(&ca).expect("get").expect("present");
        assert_eq!(&blob.bytes[..], b"alpha");
        assert_eq!(blob.cid.hex(), ca);
        assert_eq!(blob.format, Some(Format::Dill));
        assert_eq!(blob.stored_at, 10.0);
        assert_eq!(bytes_of(store, &cb), b"beta");
        assert_eq!(bytes_of(store, &cc), b"");

        let list = store.list();
        let cids: Vec<_> = list.iter().map(|m| m.cid.hex()).collect();
        assert_eq!(cids, vec![ca.clone(), cb.clone(), cc.clone()]);
        assert_eq!(list[0].size, 5);
        assert_eq!(list[1].format, Some(Format::Json));
        assert_eq!(list[2].format, None);

        // Dedupe: already present, and twice within one call.
        let again = vec![
            nb(b"alpha", Some(Format::Json)),
            nb(b"gamma", None),
            nb(b"gamma", Some(Format::Dill)),
        ];
        assert_eq!(store.put_blobs(again, 20.0).expect("put"), 1);
        let blob = store.get(&ca).expect("get").expect("present");
        assert_eq!(blob.format, Some(Format::Dill));
        assert_eq!(blob.stored_at, 10.0);
        let gamma = store.get(&cid_of(b"gamma")).expect("get").expect("present");
        assert_eq!(gamma.format, None);
        assert_eq!(store.len(), 4);
        assert_eq!(store.put_blobs(Vec::new(), 30.0).expect("put"), 0);

        store
            .append_record(RecordKind::CallRecord, &json!({"call": 1}))
            .expect("append");

        // Lookups by text accept only 128 lowercase hex digits.
        assert!(!store.contains(&ca.to_uppercase()));
        assert!(!store.contains("alpha"));
        assert_eq!(store.len(), 4);
        assert_all_blobs_verify(store);
    }

    #[test]
    fn format_names() {
        assert_eq!(Format::Dill.as_str(), "dill");
        assert_eq!(Format::Json.as_str(), "json");
    }

    #[test]
    fn memory_round_trip() {
        let store = Store::memory();
        assert!(store.path().is_none());
        check_basic_round_trip(&store);
    }

    #[test]
    fn a_tombstone_forgets_objects_and_records_and_is_applied_again_on_open() {
        let dir = TempDir::new("tombstone");
        let path = dir.file("store.log");
        let (gone, kept) = (b"only the deleted run".to_vec(), b"shared".to_vec());
        let tomb = json!({"settings": 1, "delete_run": "1+2", FORGET_KEY: [cid_of(&gone)]});
        let key = |seq| IndexKey {
            seq,
            ..IndexKey::default()
        };
        {
            let (store, _) = Store::open(&path).expect("open new");
            store
                .put_blobs(vec![nb(&gone, None), nb(&kept, None)], 1.0)
                .expect("put");
            let offsets = store
                .append_records(&[
                    (RecordKind::CallRecord, &json!({"n": 1}), key(1)),
                    (RecordKind::CallRecord, &json!({"n": 2}), key(2)),
                ])
                .expect("append");
            // Not a settings record: refused, nothing changes.
            assert!(store.forget(&json!({"n": 3}), &offsets[..1]).is_err());
            assert_eq!(store.len(), 2);
            let (n, bytes, at) = store.forget(&tomb, &offsets[..1]).expect("forget");
            assert_eq!((n, bytes), (1, gone.len() as u64));
            assert!(at.is_some_and(|at| at > offsets[1]), "{at:?}");
            assert!(store.get(&cid_of(&gone)).expect("get").is_none());
            assert_eq!(bytes_of(&store, &cid_of(&kept)), kept);
            assert_eq!(store.list().len(), 1);
            let (page, total) = store
                .index_page(RecordKind::CallRecord, &|_| true, 0, 10)
                .expect("walk");
            assert_eq!((page, total), (vec![offsets[1]], 1));
            // Stored again after the tombstone: a new object, kept after a reopen.
            let again = b"stored again".to_vec();
            let t2 = json!({"settings": 1, FORGET_KEY: [cid_of(&again)]});
            store.put_blobs(vec![nb(&again, None)], 2.0).expect("put");
            store.forget(&t2, &[]).expect("forget");
            store.put_blobs(vec![nb(&again, None)], 3.0).expect("put");
        }
        // Reopened (as after a kill): the objects stay forgotten, the tombstone is handed
        // back in order with the records; the caller marks their index entries again.
        let (store, rec) = Store::open(&path).expect("reopen");
        assert!(store.get(&cid_of(&gone)).expect("get").is_none());
        assert_eq!(bytes_of(&store, &cid_of(&kept)), kept);
        assert_eq!(bytes_of(&store, &cid_of(b"stored again")), b"stored again");
        assert_eq!(rec.records.len(), 4, "{:?}", rec.records);
        assert_eq!(rec.records[2], (RecordKind::Settings, tomb));
        let (page, _) = store
            .index_page(RecordKind::CallRecord, &|_| true, 0, 10)
            .expect("walk");
        assert_eq!(page.len(), 2);
        assert_eq!(store.forget_records(&page[1..]).expect("mark"), 1);
        let (after, total) = store
            .index_page(RecordKind::CallRecord, &|_| true, 0, 10)
            .expect("walk");
        assert_eq!((after, total), (vec![page[0]], 1));
    }

    #[test]
    fn file_round_trip_and_reopen() {
        let dir = TempDir::new("roundtrip");
        let path = dir.file("nested/deeper/store.log");
        {
            let (store, rec) = Store::open(&path).expect("open new");
            assert_eq!(store.path().as_deref(), Some(path.as_path()));
            assert!(rec.records.is_empty());
            assert_eq!(
                (rec.blobs, rec.dropped_records, rec.truncated_bytes),
                (0, 0, 0)
            );
            check_basic_round_trip(&store);
            store
                .append_record(RecordKind::History, &json!({"h": [1, 2, 3]}))
                .expect("append");
            let big: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
            assert_eq!(store.put_blobs(vec![nb(&big, None)], 50.0).expect("put"), 1);
            assert_eq!(bytes_of(&store, &cid_of(&big)), big);
        }
        let (store, rec) = Store::open(&path).expect("reopen");
        assert_eq!(
            (rec.blobs, rec.dropped_records, rec.truncated_bytes),
            (5, 0, 0)
        );
        assert_eq!(
            rec.records,
            vec![
                (RecordKind::CallRecord, json!({"call": 1})),
                (RecordKind::History, json!({"h": [1, 2, 3]})),
            ]
        );
        let cids: Vec<_> = store.list().into_iter().map(|m| m.cid.hex()).collect();
        let big: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        assert_eq!(
            cids,
            vec![
                cid_of(b"alpha"),
                cid_of(b"beta"),
                cid_of(b""),
                cid_of(b"gamma"),
                cid_of(&big)
            ]
        );
        let alpha = store.get(&cid_of(b"alpha")).expect("get").expect("present");
        assert_eq!(alpha.format, Some(Format::Dill));
        assert_eq!(alpha.stored_at, 10.0);
        assert_eq!(bytes_of(&store, &cid_of(&big)), big);
        // Dedupe across reopen.
        assert_eq!(
            store
                .put_blobs(vec![nb(b"alpha", None), nb(b"epsilon", None)], 60.0)
                .expect("put"),
            1
        );
        assert_all_blobs_verify(&store);
    }

    #[test]
    fn records_and_blobs_interleave_in_order() {
        let dir = TempDir::new("order");
        let path = dir.file("s.log");
        {
            let (store, _) = Store::open(&path).expect("open");
            for i in 0..5 {
                store
                    .append_record(RecordKind::CallRecord, &json!({"i": i}))
                    .expect("append");
                store
                    .put_blobs(vec![nb(format!("blob {i}").as_bytes(), None)], f64::from(i))
                    .expect("put");
                store
                    .append_record(RecordKind::History, &json!({"h": i, "k": "z", "a": 1}))
                    .expect("append");
            }
        }
        let (store, rec) = Store::open(&path).expect("reopen");
        let expected: Vec<_> = (0..5)
            .flat_map(|i| {
                [
                    (RecordKind::CallRecord, json!({"i": i})),
                    (RecordKind::History, json!({"h": i, "k": "z", "a": 1})),
                ]
            })
            .collect();
        assert_eq!(rec.records, expected);
        // preserve_order: key order survives.
        let keys: Vec<_> = rec.records[1]
            .1
            .as_object()
            .expect("object")
            .keys()
            .cloned()
            .collect();
        assert_eq!(keys, vec!["h", "k", "a"]);
        let list = store.list();
        for (i, m) in list.iter().enumerate() {
            assert_eq!(m.cid.hex(), cid_of(format!("blob {i}").as_bytes()));
            assert_eq!(m.stored_at, i as f64);
        }
    }

    #[test]
    fn duplicate_blob_in_file_keeps_first() {
        let dir = TempDir::new("dup");
        let path = dir.file("s.log");
        drop(Store::open(&path).expect("create"));
        let cid = parse_digest(&cid_of(b"same")).expect("cid");
        let mut tail = Vec::new();
        encode_record(&mut tail, KIND_BLOB, FORMAT_DILL, 1.0, &cid, b"same");
        encode_record(&mut tail, KIND_BLOB, FORMAT_JSON, 2.0, &cid, b"same");
        let mut bytes = std::fs::read(&path).expect("read");
        bytes.extend_from_slice(&tail);
        std::fs::write(&path, &bytes).expect("write");
        let (store, rec) = Store::open(&path).expect("reopen");
        assert_eq!((rec.blobs, rec.dropped_records), (1, 0));
        let blob = store.get(&cid_of(b"same")).expect("get").expect("present");
        assert_eq!((blob.format, blob.stored_at), (Some(Format::Dill), 1.0));
    }

    /// Builds a file with three records and returns (path bytes, record
    /// boundaries): boundaries[i]..boundaries[i + 1] is record i.
    fn three_record_file(dir: &TempDir, last_is_blob: bool) -> (Vec<u8>, Vec<u64>) {
        let path = dir.file("base.log");
        let mut bounds = vec![FILE_HEADER_LEN];
        let (store, _) = Store::open(&path).expect("open");
        let size = |p: &Path| std::fs::metadata(p).expect("metadata").len();
        store
            .put_blobs(vec![nb(b"first", Some(Format::Dill))], 1.0)
            .expect("put");
        bounds.push(size(&path));
        store
            .append_record(RecordKind::CallRecord, &json!({"n": 2}))
            .expect("append");
        bounds.push(size(&path));
        if last_is_blob {
            store.put_blobs(vec![nb(b"third", None)], 3.0).expect("put");
        } else {
            store
                .append_record(RecordKind::History, &json!({"n": 3}))
                .expect("append");
        }
        bounds.push(size(&path));
        drop(store);
        (std::fs::read(&path).expect("read"), bounds)
    }

    #[test]
    fn truncated_last_record_at_every_cut_point() {
        for last_is_blob in [true, false] {
            let dir = TempDir::new("cut");
            let (full, bounds) = three_record_file(&dir, last_is_blob);
            let (start, end) = (bounds[2], bounds[3]);
            for cut in start..end {
                let path = dir.case(&full[..cut as usize]);
                {
                    let (store, rec) = Store::open(&path).expect("open cut file");
                    assert_eq!(rec.truncated_bytes, cut - start, "cut {cut}");
                    assert_eq!(rec.dropped_records, 0);
                    assert_eq!(rec.records, vec![(RecordKind::CallRecord, json!({"n": 2}))]);
                    assert_eq!(store.len(), 1);
                    assert_eq!(bytes_of(&store, &cid_of(b"first")), b"first");
                    assert!(!store.contains(&cid_of(b"third")));
                    assert_eq!(std::fs::metadata(&path).expect("meta").len(), start);
                    store
                        .append_record(RecordKind::History, &json!({"after": cut}))
                        .expect("append");
                    store
                        .put_blobs(vec![nb(b"fourth", None)], 4.0)
                        .expect("put");
                }
                let (store, rec) = Store::open(&path).expect("reopen");
                assert_eq!((rec.truncated_bytes, rec.dropped_records), (0, 0));
                assert_eq!(
                    rec.records,
                    vec![
                        (RecordKind::CallRecord, json!({"n": 2})),
                        (RecordKind::History, json!({"after": cut})),
                    ]
                );
                assert_eq!(bytes_of(&store, &cid_of(b"fourth")), b"fourth");
                assert_eq!(store.len(), 2);
                drop(store);
            }
        }
    }

    #[test]
    fn garbled_last_record_is_dropped() {
        for last_is_blob in [true, false] {
            let dir = TempDir::new("garble-last");
            let (mut full, bounds) = three_record_file(&dir, last_is_blob);
            let i = (bounds[3] - 2) as usize; // inside the body
            full[i] ^= 0x40;
            let path = dir.file("g.log");
            std::fs::write(&path, &full).expect("write");
            let (store, rec) = Store::open(&path).expect("open");
            assert_eq!(rec.truncated_bytes, bounds[3] - bounds[2]);
            assert_eq!(rec.records, vec![(RecordKind::CallRecord, json!({"n": 2}))]);
            assert_eq!(store.len(), 1);
            assert!(!store.contains(&cid_of(b"third")));
        }
    }

    #[test]
    fn garbled_middle_record_only_that_one_dropped() {
        // Flip every byte of the middle record in turn (header, digest, body).
        let dir = TempDir::new("garble-mid");
        let (full, bounds) = three_record_file(&dir, true);
        for i in bounds[1]..bounds[2] {
            let mut bytes = full.clone();
            bytes[i as usize] ^= 0x01;
            let path = dir.case(&bytes);
            let (store, rec) = Store::open(&path).expect("open");
            assert_eq!(
                (rec.dropped_records, rec.truncated_bytes),
                (1, 0),
                "flip at {i}"
            );
            assert!(rec.records.is_empty(), "flip at {i}");
            assert_eq!(store.len(), 2);
            assert_eq!(bytes_of(&store, &cid_of(b"first")), b"first");
            assert_eq!(bytes_of(&store, &cid_of(b"third")), b"third");
        }
        // A blob in the middle, likewise.
        let mut bytes = full.clone();
        bytes[(bounds[1] - 1) as usize] ^= 0xff;
        let path = dir.case(&bytes);
        let (store, rec) = Store::open(&path).expect("open");
        assert_eq!((rec.dropped_records, rec.truncated_bytes), (1, 0));
        assert_eq!(rec.records.len(), 1);
        assert!(!store.contains(&cid_of(b"first")));
        assert_eq!(bytes_of(&store, &cid_of(b"third")), b"third");
    }

    #[test]
    fn wrong_magic_is_an_error_and_file_untouched() {
        let dir = TempDir::new("magic");
        let path = dir.file("foreign.txt");
        let content = b"this is somebody else's file, long enough for a header".to_vec();
        std::fs::write(&path, &content).expect("write");
        let err = Store::open(&path).err().expect("must fail");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("foreign.txt"), "{err}");
        // Short foreign file too.
        let short = dir.file("short.txt");
        std::fs::write(&short, b"hi").expect("write");
        let err = Store::open(&short).err().expect("must fail");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert_eq!(std::fs::read(&path).expect("read"), content);
        assert_eq!(std::fs::read(&short).expect("read"), b"hi");
        // Unknown versions: a newer one, and zero.
        for version in [FILE_VERSION + 1, 0] {
            let path = dir.file(&format!("v{version}.log"));
            let mut h = file_header();
            h[8..12].copy_from_slice(&version.to_le_bytes());
            std::fs::write(&path, h).expect("write");
            let err = Store::open(&path).err().expect("must fail");
            assert_eq!(err.kind(), io::ErrorKind::InvalidData);
            assert_eq!(std::fs::read(&path).expect("read"), h, "left untouched");
        }
    }

    #[test]
    fn a_version_1_file_is_read_and_upgraded() {
        let dir = TempDir::new("v1");
        let path = dir.file("old.log");
        let mut bytes = file_header();
        bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
        let mut bytes = bytes.to_vec();
        let cid = parse_digest(&cid_of(b"old blob")).expect("cid");
        encode_record(&mut bytes, KIND_BLOB, FORMAT_DILL, 1.0, &cid, b"old blob");
        let body = br#"{"call_id":"1.000000-001"}"#;
        let digest: [u8; DIGEST_LEN] = Sha512::digest(body).into();
        encode_record(
            &mut bytes,
            KIND_CALL_RECORD,
            FORMAT_NONE,
            2.0,
            &digest,
            body,
        );
        std::fs::write(&path, &bytes).expect("write");

        let (store, rec) = Store::open(&path).expect("open");
        assert_eq!(rec.version, 1);
        assert_eq!(rec.records.len(), 1);
        assert_eq!(bytes_of(&store, &cid_of(b"old blob")), b"old blob");
        drop(store);
        let (_, rec) = Store::open(&path).expect("reopen");
        assert_eq!(rec.version, FILE_VERSION, "the header was upgraded");
        assert_eq!(rec.records.len(), 1);
    }

    #[test]
    fn settings_records_have_the_history_kind_on_disk_and_their_own_in_the_index() {
        let dir = TempDir::new("settings");
        let path = dir.file("s.log");
        let (store, _) = Store::open(&path).expect("open");
        let settings = json!({"settings": 1, "breakpoints": []});
        let history = json!({"id": "h1", "call": {}});
        store
            .append_records(&[
                (RecordKind::History, &history, IndexKey::default()),
                (RecordKind::Settings, &settings, IndexKey::default()),
            ])
            .expect("append");
        // A body that does not say what it is is refused either way round.
        for (kind, body) in [
            (RecordKind::Settings, &history),
            (RecordKind::History, &settings),
        ] {
            let err = store
                .append_records(&[(kind, body, IndexKey::default())])
                .expect_err("refused");
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        }
        let (h, total) = store
            .index_page(RecordKind::History, &|_| true, 0, 10)
            .expect("index");
        assert_eq!(total, 1);
        assert_eq!(
            store.read_record(h[0]).expect("read").0,
            RecordKind::History
        );
        let (s, total) = store
            .index_page(RecordKind::Settings, &|_| true, 0, 10)
            .expect("index");
        assert_eq!(total, 1);
        assert_eq!(
            store.read_record(s[0]).expect("read"),
            (RecordKind::Settings, settings.clone())
        );
        // On disk both have kind 3, the kind a reader without settings knows.
        let bytes = std::fs::read(&path).expect("read");
        let kind_at = |offset: u64| bytes[offset as usize + 4];
        assert_eq!((kind_at(h[0]), kind_at(s[0])), (KIND_HISTORY, KIND_HISTORY));
        drop(store);
        let (_, rec) = Store::open(&path).expect("reopen");
        assert_eq!(
            rec.records,
            vec![
                (RecordKind::History, history),
                (RecordKind::Settings, settings)
            ]
        );
    }

    #[test]
    fn the_index_pages_records_newest_first_by_key_and_survives_reopening() {
        let dir = TempDir::new("index");
        let path = dir.file("i.log");
        let (store, _) = Store::open(&path).expect("open");
        for i in 0..10u32 {
            let v = json!({"n": i});
            let key = IndexKey {
                a: i % 2,
                b: i,
                tag: (i % 3) as u8,
                seq: u64::from(i) << 40,
            };
            let kind = if i == 9 {
                RecordKind::History
            } else {
                RecordKind::CallRecord
            };
            store.append_records(&[(kind, &v, key)]).expect("append");
        }
        let page = |store: &Store, skip, take| {
            let (offsets, total) = store
                .index_page(RecordKind::CallRecord, &|k| k.a == 0, skip, take)
                .expect("index");
            let ns: Vec<u64> = offsets
                .iter()
                .map(|&o| store.read_record(o).expect("read").1["n"].as_u64().unwrap())
                .collect();
            (ns, total)
        };
        assert_eq!(page(&store, 0, 10), (vec![8, 6, 4, 2, 0], 5));
        assert_eq!(page(&store, 1, 2), (vec![6, 4], 5));
        // A cursor in steps: tags and sequence numbers come back as written.
        let tagged = |k: IndexKey| k.tag == 1 && k.seq == u64::from(k.b) << 40;
        let (first, next) = store
            .index_before(RecordKind::CallRecord, &tagged, None, 2)
            .expect("index");
        let n = |o: &u64| {
            store.read_record(*o).expect("read").1["n"]
                .as_u64()
                .unwrap()
        };
        assert_eq!(first.iter().map(n).collect::<Vec<_>>(), [7, 4]);
        assert_eq!(next, 4, "it continues before the entry of record 4");
        let (rest, next) = store
            .index_before(RecordKind::CallRecord, &tagged, Some(next), 2)
            .expect("index");
        assert_eq!((rest.iter().map(n).collect::<Vec<_>>(), next), (vec![1], 0));
        assert_eq!(
            store
                .index_before(RecordKind::CallRecord, &|_| true, Some(0), 5)
                .expect("index"),
            (Vec::new(), 0)
        );
        drop(store);
        let mut n = 0u32;
        let (store, _) = Store::open_with(&path, &mut |_, _, v| {
            n += 1;
            IndexKey {
                a: (v["n"].as_u64().unwrap() % 2) as u32,
                b: 0,
                ..IndexKey::default()
            }
        })
        .expect("reopen");
        assert_eq!(n, 10);
        assert_eq!(page(&store, 0, 3), (vec![8, 6, 4], 5));
        let (h, total) = store
            .index_page(RecordKind::History, &|_| true, 0, 10)
            .expect("index");
        assert_eq!((h.len(), total), (1, 1));
        assert!(store.read_record(3).is_err(), "not a record offset");
    }

    #[test]
    fn concurrent_writers_lose_nothing_and_every_acknowledged_write_is_indexed() {
        let dir = TempDir::new("group");
        let path = dir.file("g.log");
        let (store, _) = Store::open(&path).expect("open");
        let (threads, rounds) = (6u32, 40u32);
        std::thread::scope(|scope| {
            for t in 0..threads {
                let store = &store;
                scope.spawn(move || {
                    for r in 0..rounds {
                        let own = format!("blob {t} {r}").into_bytes();
                        let shared = format!("shared {r}").into_bytes();
                        store
                            .put_blobs(vec![nb(&own, None), nb(&shared, None)], 1.0)
                            .expect("put");
                        let v = json!({"t": t, "r": r});
                        let key = IndexKey {
                            a: t,
                            b: r,
                            ..IndexKey::default()
                        };
                        store
                            .append_records(&[(RecordKind::CallRecord, &v, key)])
                            .expect("append");
                        // Acknowledged means indexed and readable.
                        assert!(store.contains(&cid_of(&own)));
                    }
                });
            }
        });
        let check = |store: &Store| {
            assert_eq!(store.len() as u32, threads * rounds + rounds);
            let (offsets, total) = store
                .index_page(RecordKind::CallRecord, &|_| true, 0, 10_000)
                .expect("index");
            assert_eq!(total as u32, threads * rounds);
            let mut seen: Vec<(u64, u64)> = offsets
                .iter()
                .map(|&o| {
                    let v = store.read_record(o).expect("read").1;
                    (v["t"].as_u64().unwrap(), v["r"].as_u64().unwrap())
                })
                .collect();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len() as u32, threads * rounds);
        };
        check(&store);
        drop(store);
        let (store, rec) = Store::open(&path).expect("reopen");
        assert_eq!(rec.records.len() as u32, threads * rounds);
        check(&store);
        assert_all_blobs_verify(&store);
    }

    #[test]
    fn empty_or_torn_header_file_is_new() {
        let dir = TempDir::new("empty");
        for n in 0..FILE_HEADER_LEN as usize {
            let path = dir.file(&format!("e{n}.log"));
            std::fs::write(&path, &file_header()[..n]).expect("write");
            let (store, rec) = Store::open(&path).expect("open");
            assert_eq!(rec.truncated_bytes, n as u64);
            assert!(store.is_empty());
            assert_eq!(std::fs::read(&path).expect("read"), file_header());
            store.put_blobs(vec![nb(b"x", None)], 1.0).expect("put");
            drop(store);
            let (store, _) = Store::open(&path).expect("reopen");
            assert_eq!(bytes_of(&store, &cid_of(b"x")), b"x");
        }
    }

    #[test]
    fn fuzz_never_panics() {
        let dir = TempDir::new("fuzz");
        let (full, _) = three_record_file(&dir, true);
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);

        // Truncation at every byte, including inside the file header.
        for cut in 0..=full.len() {
            let path = dir.case(&full[..cut]);
            let (store, _) = Store::open(&path).expect("a prefix always opens");
            assert_all_blobs_verify(&store);
        }
        // Every single-byte flip, with a few different masks.
        for i in 0..full.len() {
            let mut bytes = full.clone();
            bytes[i] ^= 1 << (rng.next() % 8);
            let path = dir.case(&bytes);
            if let Ok((store, _)) = Store::open(&path) {
                assert_all_blobs_verify(&store);
            }
        }
        // Random garbage: whole files, and after a valid header / records.
        for round in 0..60 {
            let n = (rng.next() % 600) as usize;
            let mut bytes = match round % 3 {
                0 => Vec::new(),
                1 => file_header().to_vec(),
                _ => full.clone(),
            };
            let mut garbage = rng.bytes(n);
            // Sprinkle record magics so resync paths are exercised.
            for _ in 0..(rng.next() % 4) {
                if garbage.len() >= 4 {
                    let at = (rng.next() as usize) % (garbage.len() - 3);
                    garbage[at..at + 4].copy_from_slice(&RECORD_MAGIC);
                }
            }
            bytes.extend_from_slice(&garbage);
            if round % 5 == 0 {
                bytes.extend_from_slice(&full[FILE_HEADER_LEN as usize..]);
            }
            let path = dir.case(&bytes);
            if let Ok((store, _)) = Store::open(&path) {
                assert_all_blobs_verify(&store);
                store
                    .put_blobs(vec![nb(b"after fuzz", None)], 9.0)
                    .expect("put");
                drop(store);
                let (store, _) = Store::open(&path).expect("reopen after fuzz");
                assert_eq!(bytes_of(&store, &cid_of(b"after fuzz")), b"after fuzz");
            }
        }
    }

    #[test]
    fn magic_straddling_scan_chunks_is_found() {
        let dir = TempDir::new("chunk");
        let path = dir.file("c.log");
        let mut bytes = file_header().to_vec();
        // Garbage so that the next record's magic straddles a chunk boundary.
        let gap = SCAN_CHUNK - 2;
        bytes.extend(std::iter::repeat_n(0xAA, gap));
        let cid = parse_digest(&cid_of(b"late")).expect("cid");
        encode_record(&mut bytes, KIND_BLOB, FORMAT_NONE, 5.0, &cid, b"late");
        std::fs::write(&path, &bytes).expect("write");
        let (store, rec) = Store::open(&path).expect("open");
        assert_eq!((rec.dropped_records, rec.truncated_bytes), (1, 0));
        assert_eq!(bytes_of(&store, &cid_of(b"late")), b"late");
    }

    #[test]
    fn poisoned_lock_recovers() {
        let store = Arc::new(Store::memory());
        let s2 = Arc::clone(&store);
        let _ = std::thread::spawn(move || {
            let _guard = s2.state.lock();
            panic!("poison the lock");
        })
        .join();
        store.put_blobs(vec![nb(b"ok", None)], 1.0).expect("put");
        assert!(store.contains(&cid_of(b"ok")));
    }
}
