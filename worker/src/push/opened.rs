//! The isolate's copy of the push last read: its `packet.json` and that
//! manifest parsed. A push's manifest is written once, when the push is
//! created, under a key of its own id, and never changes, so the parts,
//! looks and `complete` of one push need not read and parse its megabytes
//! again for each request (a first save sends a dozen parts). Best effort:
//! another isolate, or a push read since, reads R2 as before. One push is
//! kept, so the cache never holds more than the largest manifest the
//! format allows, parsed.

use std::cell::RefCell;
use std::rc::Rc;

use packet_core::assembled::Assembly;

/// A push's manifest: its bytes and their assembly.
#[derive(Clone, Debug)]
pub struct Opened {
    /// `packet.json`'s bytes.
    pub json: Rc<Vec<u8>>,
    /// Those bytes checked and parsed.
    pub assembly: Rc<Assembly>,
}

thread_local! {
    static LAST: RefCell<Option<(String, Opened)>> = const { RefCell::new(None) };
}

/// The manifest of push `id`, if it is the one kept.
pub fn get(id: &str) -> Option<Opened> {
    LAST.with(|last| {
        let last = last.borrow();
        let (kept, opened) = last.as_ref()?;
        (kept == id).then(|| opened.clone())
    })
}

/// Keeps the manifest of push `id`, in place of any other.
pub fn keep(id: &str, opened: &Opened) {
    LAST.with(|last| *last.borrow_mut() = Some((id.to_owned(), opened.clone())));
}

/// Forgets push `id`'s manifest (the push ends).
pub fn forget(id: &str) {
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if last.as_ref().is_some_and(|(kept, _)| kept == id) {
            *last = None;
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
}
