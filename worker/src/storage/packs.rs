//! A packet's pack table: the R2 objects its chunks lie in, by slot. Slots
//! are stable from a packet to the next: a new packet's table starts as its
//! base's, a pack it no longer uses leaves its slot empty, and a new pack
//! takes the first empty slot (or a new one at the end). So the layout
//! entries of unchanged bodies, which name slots, stay byte for byte the
//! same, and so do the layout's chunks.

use std::collections::HashMap;

/// Slots of R2 object keys; an empty slot is `None`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackTable {
    slots: Vec<Option<String>>,
    index: HashMap<String, u32>,
}

impl PackTable {
    /// An empty table.
    pub fn new() -> PackTable {
        PackTable::default()
    }

    /// A table of these slots (`None` for an empty one); `None` if a key is
    /// in two slots.
    pub fn from_slots(slots: Vec<Option<String>>) -> Option<PackTable> {
        let mut index = HashMap::new();
        for (i, s) in slots.iter().enumerate() {
            if let Some(k) = s {
                if index.insert(k.clone(), i as u32).is_some() {
                    return None;
                }
            }
        }
        Some(PackTable { slots, index })
    }

    /// The slot of `key`: its own, else the first empty one, else a new one.
    pub fn slot(&mut self, key: &str) -> u32 {
        if let Some(&i) = self.index.get(key) {
            return i;
        }
        let i = match self.slots.iter().position(Option::is_none) {
            Some(i) => {
                self.slots[i] = Some(key.to_string());
                i as u32
            }
            None => {
                self.slots.push(Some(key.to_string()));
                (self.slots.len() - 1) as u32
            }
        };
        self.index.insert(key.to_string(), i);
        i
    }

    /// The slot of `key`, if it has one.
    pub fn find(&self, key: &str) -> Option<u32> {
        self.index.get(key).copied()
    }

    /// The key in slot `slot` (`None` if empty or past the end).
    pub fn key(&self, slot: u32) -> Option<&str> {
        self.slots.get(slot as usize).and_then(|s| s.as_deref())
    }

    /// Every slot, in order.
    pub fn slots(&self) -> &[Option<String>] {
        &self.slots
    }

    /// How many slots (empty ones included).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether it has no slot.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The keys, each once, in slot order.
    pub fn keys(&self) -> Vec<String> {
        self.slots.iter().flatten().cloned().collect()
    }

    /// Empties every slot `used` does not mark, and drops empty slots at the
    /// end.
    pub fn keep_only(&mut self, used: &[bool]) {
        for (i, s) in self.slots.iter_mut().enumerate() {
            if !used.get(i).copied().unwrap_or(false) {
                if let Some(k) = s.take() {
                    self.index.remove(&k);
                }
            }
        }
        while matches!(self.slots.last(), Some(None)) {
            self.slots.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_stay_where_they_were_and_empty_ones_are_reused() {
        let mut t = PackTable::new();
        assert_eq!(t.slot("packs/a"), 0);
        assert_eq!(t.slot("packs/b"), 1);
        assert_eq!(t.slot("packs/c"), 2);
        assert_eq!(t.slot("packs/a"), 0);
        t.keep_only(&[false, true, true]);
        assert_eq!(t.key(0), None);
        assert_eq!(t.key(1), Some("packs/b"));
        assert_eq!(t.slot("packs/d"), 0, "the first empty slot");
        assert_eq!(t.find("packs/a"), None);
        t.keep_only(&[true, true, false]);
        assert_eq!(t.len(), 2, "empty slots at the end go");
        assert_eq!(t.keys(), ["packs/d", "packs/b"]);
        assert!(PackTable::from_slots(vec![Some("x".into()), None, Some("x".into())]).is_none());
        let again = PackTable::from_slots(t.slots().to_vec()).unwrap();
        assert_eq!(again, t);
    }
}
