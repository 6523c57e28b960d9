//! Unit tests of `crate::store`.

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
