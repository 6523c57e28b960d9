//! The content store, through the library. Every use of the store API is in this module.

use super::*;

pub(super) struct StoreResult {
    pub(super) objects_per_s: f64,
    pub(super) mb_per_s: f64,
    pub(super) reopen_s: f64,
    /// Resident memory of the reopened store's index, per object.
    pub(super) index_bytes_per_object: f64,
    pub(super) objects: usize,
}

pub(super) fn store_bench(dir: &Path, objects: usize, batch: usize) -> Res<StoreResult> {
    use cideldill_server::cas::cid_value;
    use cideldill_server::store::{NewBlob, Store};
    let path = dir.join("store.db");
    let (store, _) = Store::open(&path).map_err(err("open"))?;
    let mut put = Duration::ZERO;
    let mut bytes = 0usize;
    let mut i = 0usize;
    while i < objects {
        let blobs: Vec<NewBlob> = (i..(i + batch).min(objects))
            .map(|k| {
                // A small pickle-sized blob, distinct per object.
                let data =
                    format!("\u{80}\u{4}object {k:09} of the content store benchmark").into_bytes();
                NewBlob {
                    cid: cid_value(&data),
                    bytes: data,
                    format: None,
                }
            })
            .collect();
        let n = blobs.len();
        bytes += blobs.iter().map(|b| b.bytes.len()).sum::<usize>();
        let t0 = Instant::now();
        let fresh = store.put_blobs(blobs, now()).map_err(err("put_blobs"))?;
        put += t0.elapsed();
        if fresh != n {
            return Err(format!("put_blobs stored {fresh} of {n}"));
        }
        i += n;
    }
    drop(store);
    let rss_before = rss_kib(std::process::id()).unwrap_or(0);
    let t0 = Instant::now();
    let (store, recovered) = Store::open(&path).map_err(err("reopen"))?;
    let reopen_s = t0.elapsed().as_secs_f64();
    let rss_after = rss_kib(std::process::id()).unwrap_or(0);
    let index_bytes_per_object =
        rss_after.saturating_sub(rss_before) as f64 * 1024.0 / objects as f64;
    if recovered.blobs != objects || store.len() != objects {
        return Err(format!(
            "reopen found {} of {objects} blobs",
            recovered.blobs
        ));
    }
    drop(store);
    let _ = fs::remove_file(&path);
    Ok(StoreResult {
        objects_per_s: objects as f64 / put.as_secs_f64(),
        mb_per_s: bytes as f64 / put.as_secs_f64() / 1e6,
        reopen_s,
        index_bytes_per_object,
        objects,
    })
}

pub(super) fn rows_store(b: &Bench, t: &mut Table) {
    let objects = b.opts.n(1_000_000) as usize;
    let dir = b.dir("store");
    let r = fs::create_dir_all(&dir)
        .map_err(err("mkdir"))
        .and_then(|_| store_bench(&dir, objects, 1_000));
    let base = || {
        b.opts
            .baseline
            .as_ref()
            .map(|_| Cell::text("n/a (library)".into()))
    };
    match r {
        Ok(r) => {
            t.row(
                &format!(
                    "content-store append throughput, {} objects in batches of 1,000 (library)",
                    num(r.objects as f64)
                ),
                Cell::text(format!(
                    "{} objects/s, {} MB/s",
                    num(r.objects_per_s),
                    num(r.mb_per_s)
                )),
                base(),
                "—",
                None,
                false,
                "—",
            );
            t.row(
                &format!(
                    "content-store reopen time at {} objects (library)",
                    num(r.objects as f64)
                ),
                Cell::text(format!("{:.2} s", r.reopen_s)),
                base(),
                "—",
                None,
                false,
                "—",
            );
            t.row(
                &format!(
                    "content-store index in memory per object (RSS growth of the reopen at {} objects)",
                    num(r.objects as f64)
                ),
                Cell::text(format!("{:.0} B", r.index_bytes_per_object)),
                base(),
                "—",
                None,
                false,
                "stated, small",
            );
        }
        Err(e) => t.row(
            "content-store append and reopen (library)",
            Cell::of(Err(e)),
            base(),
            "—",
            None,
            false,
            "—",
        ),
    }
}
