//! Display values of stored payloads, on demand: records keep CIDs, not rendered values, and
//! `StoreRender` reads them from the content store when someone looks and renders them with the
//! pure `pretty`, through a bounded cache keyed by CID and format hint (`RenderCache`, its own
//! leaf lock, never held across I/O). Items still in their JSON form are rendered uncached.
//! The cache counts what it keeps by the rendered value's size, not the payload's: a small
//! pickle may render to its whole render budget, and such a value is not kept.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use serde_json::Value;

use crate::intern::{Cid, Val};
use crate::limits::{
    RENDER_CACHE_BYTES, RENDER_CACHE_ENTRIES, RENDER_CACHE_MAX_PAYLOAD, RENDER_CACHE_MAX_VALUE,
};
use crate::pretty;
use crate::records::{Hint, Item, Render};
use crate::store::Store;

/// About what a JSON value holds in memory: its strings plus a fixed cost per value and key.
pub fn kept_bytes(v: &Value) -> usize {
    const PER_VALUE: usize = 32;
    PER_VALUE
        + match v {
            Value::String(s) => s.len(),
            Value::Number(n) => n.as_str().len(),
            Value::Array(a) => a.iter().map(kept_bytes).sum(),
            Value::Object(m) => m
                .iter()
                .map(|(k, v)| PER_VALUE + k.len() + kept_bytes(v))
                .sum(),
            Value::Null | Value::Bool(_) => 0,
        }
}

/// A bounded cache of rendered values, oldest out first.
#[derive(Default)]
pub struct RenderCache {
    map: HashMap<(Cid, Hint), Value>,
    order: VecDeque<((Cid, Hint), usize)>,
    bytes: usize,
}

impl RenderCache {
    fn get(&self, key: &(Cid, Hint)) -> Option<Value> {
        self.map.get(key).cloned()
    }

    fn put(&mut self, key: (Cid, Hint), value: Value, cost: usize) {
        if self.map.insert(key.clone(), value).is_none() {
            self.order.push_back((key, cost));
            self.bytes += cost;
            while self.order.len() > RENDER_CACHE_ENTRIES || self.bytes > RENDER_CACHE_BYTES {
                let Some((old, old_cost)) = self.order.pop_front() else {
                    break;
                };
                self.map.remove(&old);
                self.bytes -= old_cost;
            }
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Renders from a content store through a cache.
pub struct StoreRender<'a> {
    pub store: &'a Store,
    pub cache: &'a Mutex<RenderCache>,
    /// The notes on call records (a leaf lock), if the records shown may have some.
    pub notes: Option<&'a Mutex<crate::runs::RecordNotes>>,
}

impl StoreRender<'_> {
    fn cached(&self, cid: &Cid, hint: Hint) -> Value {
        self.through_cache(cid, hint, true)
    }

    /// The cached value, or the value rendered now and, when `keep`, cached.
    fn through_cache(&self, cid: &Cid, hint: Hint, keep: bool) -> Value {
        crate::lock_rule::assert_unlocked("rendering a payload");
        let key = (cid.clone(), hint);
        if let Some(v) = self.lock().get(&key) {
            return v;
        }
        let value = match self.store.get_digest(cid.digest()) {
            Ok(Some(blob)) => {
                let value = pretty::payload(&blob.bytes, blob.format, hint.to_value().as_ref());
                if keep && blob.bytes.len() <= RENDER_CACHE_MAX_PAYLOAD {
                    let kept = kept_bytes(&value) + 64;
                    if kept <= RENDER_CACHE_MAX_VALUE {
                        self.lock().put(key, value.clone(), kept);
                    }
                }
                value
            }
            // Not cached: the payload may still arrive.
            Ok(None) => pretty::cid_missing(cid),
            Err(err) => pretty::storage_unavailable(&err),
        };
        value
    }

    /// The display value of an item object as sent (`{"cid", "serialization_format"?}`).
    pub fn json_item(&self, item: &Value) -> Value {
        self.json_cid(item.get("cid"), item.get("serialization_format"))
    }

    /// The display value of the payload stored under a CID as sent, read as `format` when
    /// given (uncached: such values come from request bodies and old records).
    pub fn json_cid(&self, cid: Option<&Value>, format: Option<&Value>) -> Value {
        let Some(Value::String(cid)) = cid else {
            return pretty::missing_cid();
        };
        match self.store.get(cid) {
            Ok(Some(blob)) => pretty::payload(&blob.bytes, blob.format, format),
            Ok(None) => pretty::cid_missing(cid),
            Err(err) => pretty::storage_unavailable(&err),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RenderCache> {
        // The cache holds no invariant a panic could break.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The same values for a scan over many records (a text search): what the cache holds is
    /// used, what it lacks is rendered without being kept, so a search over thousands of
    /// values does not evict the ones pages show.
    pub fn scanning(&self) -> Scanning<'_> {
        Scanning(self)
    }

    /// The same values for one response listing many (see [`Limited`]).
    pub fn limited(&self) -> Limited<&Self> {
        Limited::new(self, crate::limits::MAX_RENDERED_PER_RESPONSE)
    }
}

/// A `Render` for one response that lists many values: once the values it rendered reach
/// `max` bytes (as [`kept_bytes`] counts them), each further one shows as
/// `"<cut: response budget>"`. Each value has its own render budget, but a page of 1,000
/// records, each naming a payload that renders to that budget, would otherwise need gigabytes.
pub struct Limited<R> {
    inner: R,
    left: std::cell::Cell<usize>,
}

impl<R: Render> Limited<R> {
    pub fn new(inner: R, max: usize) -> Limited<R> {
        Limited {
            inner,
            left: std::cell::Cell::new(max),
        }
    }

    fn charge(&self, value: Value) -> Value {
        if value.is_null() {
            return value;
        }
        let cost = kept_bytes(&value);
        match self.left.get().checked_sub(cost) {
            Some(left) => {
                self.left.set(left);
                value
            }
            None => {
                self.left.set(0);
                pretty::cut_response()
            }
        }
    }
}

impl<R: Render> Render for Limited<R> {
    fn item(&self, item: &Item) -> Value {
        self.charge(self.inner.item(item))
    }

    fn cid(&self, cid: &Val, hint: Hint) -> Value {
        self.charge(self.inner.cid(cid, hint))
    }

    fn note(&self, call_id: &str) -> Option<String> {
        self.inner.note(call_id)
    }
}

impl<R: Render + ?Sized> Render for &R {
    fn item(&self, item: &Item) -> Value {
        (**self).item(item)
    }

    fn cid(&self, cid: &Val, hint: Hint) -> Value {
        (**self).cid(cid, hint)
    }

    fn note(&self, call_id: &str) -> Option<String> {
        (**self).note(call_id)
    }
}

/// A [`StoreRender`] that reads its cache but does not fill it (see `scanning`).
pub struct Scanning<'a>(&'a StoreRender<'a>);

impl Render for Scanning<'_> {
    fn item(&self, item: &Item) -> Value {
        match item {
            Item::Std { cid, format, .. } => self.0.through_cache(cid, *format, false),
            Item::Other { .. } => self.0.item(item),
        }
    }

    fn cid(&self, cid: &Val, hint: Hint) -> Value {
        match cid {
            Val::Cid(c) => self.0.through_cache(c, hint, false),
            other => self.0.cid(other, hint),
        }
    }

    fn note(&self, call_id: &str) -> Option<String> {
        self.0.note(call_id)
    }
}

impl Render for StoreRender<'_> {
    fn note(&self, call_id: &str) -> Option<String> {
        let notes = self.notes?.lock().unwrap_or_else(|e| e.into_inner());
        notes.get(call_id).map(str::to_owned)
    }

    fn item(&self, item: &Item) -> Value {
        match item {
            Item::Std { cid, format, .. } => self.cached(cid, *format),
            Item::Other { value, .. } => match value.tree() {
                Some(t) => self.json_item(&t),
                None => pretty::missing_cid(),
            },
        }
    }

    fn cid(&self, cid: &Val, hint: Hint) -> Value {
        match cid {
            Val::Absent | Val::Null => Value::Null,
            Val::Cid(c) => self.cached(c, hint),
            other => self.json_cid(Some(&other.to_value()), hint.to_value().as_ref()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cas::cid_value;
    use crate::store::{Format, NewBlob};
    use serde_json::json;

    #[test]
    fn values_render_from_the_store_and_are_cached() {
        let store = Store::memory();
        let cache = Mutex::new(RenderCache::default());
        let r = StoreRender {
            store: &store,
            cache: &cache,
            notes: None,
        };
        let cid = cid_value(b"[1, 2]");
        assert_eq!(
            r.cid(&Val::Cid(cid.clone()), Hint::Absent),
            json!(format!("<cid:{cid} missing>"))
        );
        assert!(
            cache.lock().unwrap().is_empty(),
            "a missing payload is not cached"
        );
        store
            .put_blobs(
                vec![NewBlob {
                    cid: cid.clone(),
                    bytes: b"[1, 2]".to_vec(),
                    format: Some(Format::Json),
                }],
                1.0,
            )
            .unwrap();
        assert_eq!(r.cid(&Val::Cid(cid.clone()), Hint::Absent), json!([1, 2]));
        assert_eq!(cache.lock().unwrap().len(), 1);
        assert_eq!(r.cid(&Val::Cid(cid), Hint::Absent), json!([1, 2]));
        assert_eq!(r.cid(&Val::Null, Hint::Absent), Value::Null);
        assert_eq!(
            r.cid(&Val::Int(3), Hint::Absent),
            json!("<missing cid>"),
            "a CID that is not a string renders as the original does"
        );
    }

    fn store_with(bytes: &[u8], format: Option<Format>) -> (Store, String) {
        let store = Store::memory();
        let cid = cid_value(bytes);
        store
            .put_blobs(
                vec![NewBlob {
                    cid: cid.clone(),
                    bytes: bytes.to_vec(),
                    format,
                }],
                1.0,
            )
            .unwrap();
        (store, cid.hex())
    }

    #[test]
    fn values_larger_than_their_payload_are_counted_by_their_size_and_not_kept() {
        // ValueError(*[s] * 50) with s = 'x' * 20_000: a 20 kB pickle showing 50 copies of s.
        let mut bytes = vec![0x80, 4, b'X'];
        bytes.extend(20_000u32.to_le_bytes());
        bytes.extend([b'x'; 20_000]);
        bytes.extend([0x94, b'0']);
        for name in ["builtins", "ValueError"] {
            bytes.push(0x8c);
            bytes.push(name.len() as u8);
            bytes.extend(name.as_bytes());
        }
        bytes.extend([0x93, b'(']);
        bytes.extend([b'h', 0].repeat(50));
        bytes.extend(*b"tR.");
        let (store, cid) = store_with(&bytes, Some(Format::Dill));
        let cache = Mutex::new(RenderCache::default());
        let r = StoreRender {
            store: &store,
            cache: &cache,
            notes: None,
        };
        let cid = Cid::parse(&cid).expect("a CID");
        let value = r.cid(&Val::Cid(cid), Hint::Absent);
        assert_eq!(value["type_name"], "ValueError");
        assert!(
            kept_bytes(&value) > RENDER_CACHE_MAX_VALUE,
            "renders large: {}",
            kept_bytes(&value)
        );
        assert!(
            value.to_string().len() <= crate::pickle::Limits::default().render_budget(bytes.len()),
            "within the render budget"
        );
        assert!(cache.lock().unwrap().is_empty(), "not kept");
        assert_eq!(
            kept_bytes(&json!({"ab": [1, "xyz"]})),
            32 + 32 + 2 + 32 + 32 + 1 + 32 + 3
        );
    }

    #[test]
    fn items_as_sent_render_from_the_store() {
        let cache = Mutex::new(RenderCache::default());
        let (store, cid) = store_with(br#"{"a": [1, 2]}"#, Some(Format::Json));
        let r = StoreRender {
            store: &store,
            cache: &cache,
            notes: None,
        };
        assert_eq!(r.json_item(&json!({"cid": cid})), json!({"a": [1, 2]}));
        assert_eq!(r.json_item(&json!({})), json!("<missing cid>"));
        assert_eq!(
            r.json_item(&json!({"cid": "ab"})),
            json!("<cid:ab missing>")
        );
        let (store, cid) = store_with(&[0x80, 4, 0x4b, 2, 0x2e], Some(Format::Dill));
        let r = StoreRender {
            store: &store,
            cache: &cache,
            notes: None,
        };
        assert_eq!(r.json_item(&json!({"cid": cid})), json!("2"));
        let (store, cid) = store_with(b"1", None);
        let r = StoreRender {
            store: &store,
            cache: &cache,
            notes: None,
        };
        assert_eq!(
            r.json_cid(Some(&json!(cid)), Some(&json!("yaml"))),
            json!("<unavailable: invalid format yaml>")
        );
        assert_eq!(r.json_cid(Some(&json!(cid)), None), json!(1));
        assert!(
            cache.lock().unwrap().is_empty(),
            "items as sent are not cached"
        );
    }
}
