//! The isolate's copy of the push last read: its `packet.json` and that
//! manifest parsed. A push's manifest is written once, when the push is
//! created, under a key of its own id, and never changes, so the parts,
//! looks and `complete` of one push need not read and parse its megabytes
//! again for each request (a first save sends a dozen parts). Best effort:
//! another isolate, or a push read since, reads R2 as before. One push is
//! kept, so the cache never holds more than the largest manifest the
//! format allows, parsed. Its part records, each written once under a key
//! of its own attempt and never changed, are kept with it, up to
//! [`RECORD_BYTES`] of them: a part no longer reads every earlier part's.

use std::cell::RefCell;
use std::rc::Rc;

use std::collections::HashMap;

use packet_core::assembled::Assembly;

use super::records::PartRecord;

/// The most encoded bytes of part records kept (beyond, they are read
/// from R2 each time).
pub const RECORD_BYTES: usize = 16 << 20;

/// A push's manifest: its bytes and their assembly.
#[derive(Clone, Debug)]
pub struct Opened {
    /// `packet.json`'s bytes.
    pub json: Rc<Vec<u8>>,
    /// Those bytes checked and parsed.
    pub assembly: Rc<Assembly>,
}

/// The part records of the push kept, by key, and their encoded size.
#[derive(Default)]
struct Records {
    by_key: HashMap<String, Rc<PartRecord>>,
    bytes: usize,
}

thread_local! {
    static LAST: RefCell<Option<(String, Opened)>> = const { RefCell::new(None) };
    static RECORDS: RefCell<Records> = RefCell::new(Records::default());
}

/// The manifest of push `id`, if it is the one kept.
pub fn get(id: &str) -> Option<Opened> {
    LAST.with(|last| {
        let last = last.borrow();
        let (kept, opened) = last.as_ref()?;
        (kept == id).then(|| opened.clone())
    })
}

/// Keeps the manifest of push `id`, in place of any other (and of its
/// records).
pub fn keep(id: &str, opened: &Opened) {
    LAST.with(|last| *last.borrow_mut() = Some((id.to_owned(), opened.clone())));
    RECORDS.with(|r| *r.borrow_mut() = Records::default());
}

/// The record at `key` of push `id`, if it is kept.
pub fn record(id: &str, key: &str) -> Option<Rc<PartRecord>> {
    get(id)?;
    RECORDS.with(|r| r.borrow().by_key.get(key).cloned())
}

/// Keeps the record at `key` of push `id` (`size` bytes encoded), if
/// that push's manifest is the one kept and the records' bound allows.
pub fn keep_record(id: &str, key: &str, record: &Rc<PartRecord>, size: usize) {
    if get(id).is_none() {
        return;
    }
    RECORDS.with(|r| {
        let mut r = r.borrow_mut();
        if r.bytes + size <= RECORD_BYTES && !r.by_key.contains_key(key) {
            r.bytes += size;
            r.by_key.insert(key.to_owned(), Rc::clone(record));
        }
    });
}

/// Forgets push `id`'s manifest (the push ends).
pub fn forget(id: &str) {
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if last.as_ref().is_some_and(|(kept, _)| kept == id) {
            *last = None;
            RECORDS.with(|r| *r.borrow_mut() = Records::default());
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet_core::Limits;

    fn opened() -> Opened {
        let json = br#"{"format":"pillbox.session-packet/2","members":[{"mode":"0755","path":"workspace","type":"dir"}],"totals":{"bytes":0,"directories":1,"files":0,"members":1,"symlinks":0}}"#.to_vec();
        let assembly = Assembly::new(&json, None, &Limits::FORMAT).expect("a manifest");
        Opened {
            json: Rc::new(json),
            assembly: Rc::new(assembly),
        }
    }

    #[test]
    fn only_the_push_kept_last_is_found_and_forgetting_it_frees_it() {
        let a = opened();
        keep("a", &a);
        assert!(get("a").is_some_and(|o| Rc::ptr_eq(&o.assembly, &a.assembly)));
        assert!(get("b").is_none());
        keep("b", &opened());
        assert!(get("a").is_none(), "one push is kept");
        forget("a");
        assert!(get("b").is_some(), "forgetting another push leaves it");
        forget("b");
        assert!(get("b").is_none());
        // The cache held the only other reference: the request's own is
        // now the last, so complete can take the assembly whole.
        assert_eq!(Rc::strong_count(&a.assembly), 1);
    }

    #[test]
    fn records_are_kept_with_their_push_and_within_the_bound() {
        let part = Rc::new(PartRecord::default());
        keep_record("a", "r1", &part, 10);
        assert!(record("a", "r1").is_none(), "no push kept: nothing kept");
        keep("a", &opened());
        keep_record("a", "r1", &part, 10);
        keep_record("b", "r2", &part, 10);
        assert!(record("a", "r1").is_some());
        assert!(record("b", "r2").is_none(), "another push's record");
        keep_record("a", "big", &part, RECORD_BYTES);
        assert!(record("a", "big").is_none(), "over the bound");
        keep("b", &opened());
        assert!(record("a", "r1").is_none() && record("b", "r1").is_none());
        keep_record("b", "r3", &part, 10);
        forget("b");
        keep("b", &opened());
        assert!(record("b", "r3").is_none(), "forgotten with its push");
    }
}
