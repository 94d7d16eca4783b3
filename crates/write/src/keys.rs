//! `KeySet`: the keys a fold has seen, exact, without an allocation per key.
//!
//! A fold keeps every key it has taken (newest row per key wins), up to a million per
//! fold; a `HashSet<String>` spends an allocation and ~60 bytes on each. Here keys live
//! in one byte arena, found through their hash; a second key with the same hash (rare)
//! goes to a small overflow set, so membership is always exact.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;

#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    len: usize,
}

#[derive(Debug, Clone)]
pub struct KeySet<S = ahash::RandomState> {
    hasher: S,
    bytes: Vec<u8>,
    /// Key hash → the first key with that hash, in `bytes`.
    first: HashMap<u64, Span, ahash::RandomState>,
    /// Keys whose hash an earlier, different key already holds.
    others: HashSet<String, ahash::RandomState>,
}

impl Default for KeySet {
    fn default() -> Self {
        KeySet::with_hasher(ahash::RandomState::new())
    }
}

impl<S: BuildHasher> KeySet<S> {
    pub fn with_hasher(hasher: S) -> Self {
        KeySet {
            hasher,
            bytes: Vec::new(),
            first: HashMap::default(),
            others: HashSet::default(),
        }
    }

    /// Room for `keys` more keys of about `key_bytes` bytes each.
    pub fn reserve(&mut self, keys: usize, key_bytes: usize) {
        self.first.reserve(keys);
        self.bytes.reserve(keys.saturating_mul(key_bytes));
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.first.len() + self.others.len()
    }

    fn held(&self, span: Span) -> &[u8] {
        &self.bytes[span.start..span.start + span.len]
    }

    /// Add `key`; true when it was not in the set.
    pub fn insert(&mut self, key: &str) -> bool {
        let hash = self.hasher.hash_one(key);
        match self.first.entry(hash) {
            Entry::Vacant(slot) => {
                let start = self.bytes.len();
                self.bytes.extend_from_slice(key.as_bytes());
                slot.insert(Span {
                    start,
                    len: key.len(),
                });
                true
            }
            Entry::Occupied(slot) => {
                let span = *slot.get();
                if &self.bytes[span.start..span.start + span.len] == key.as_bytes() {
                    false
                } else {
                    self.others.insert(key.to_owned())
                }
            }
        }
    }

    pub fn contains(&self, key: &str) -> bool {
        let hash = self.hasher.hash_one(key);
        match self.first.get(&hash) {
            None => false,
            Some(&span) => self.held(span) == key.as_bytes() || self.others.contains(key),
        }
    }
}

impl<'k, S: BuildHasher> Extend<&'k str> for KeySet<S> {
    fn extend<I: IntoIterator<Item = &'k str>>(&mut self, keys: I) {
        for key in keys {
            self.insert(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key hashes alike: each one after the first takes the overflow path.
    #[derive(Default)]
    struct OneBucket;

    impl BuildHasher for OneBucket {
        type Hasher = OneBucketHasher;
        fn build_hasher(&self) -> OneBucketHasher {
            OneBucketHasher
        }
    }

    struct OneBucketHasher;

    impl std::hash::Hasher for OneBucketHasher {
        fn finish(&self) -> u64 {
            7
        }
        fn write(&mut self, _: &[u8]) {}
    }

    fn behaves_as_a_set<S: BuildHasher>(mut set: KeySet<S>) {
        let keys = ["ada", "bob", "", "ad", "ada ", "bob"];
        let mut model = HashSet::new();
        for key in keys {
            assert_eq!(set.insert(key), model.insert(key), "insert {key:?}");
        }
        assert_eq!(set.len(), model.len());
        for key in ["ada", "bob", "", "ad", "ada ", "a", "bo", "carol"] {
            assert_eq!(set.contains(key), model.contains(key), "contains {key:?}");
        }
    }

    #[test]
    fn keys_are_held_exactly() {
        behaves_as_a_set(KeySet::default());
    }

    #[test]
    fn keys_whose_hashes_collide_are_told_apart() {
        behaves_as_a_set(KeySet::with_hasher(OneBucket));
    }

    #[test]
    fn many_keys_round_trip() {
        let mut set = KeySet::default();
        set.reserve(10_000, 8);
        for i in 0..10_000 {
            assert!(set.insert(&format!("k{i}")));
        }
        for i in 0..10_000 {
            assert!(!set.insert(&format!("k{i}")));
            assert!(set.contains(&format!("k{i}")));
        }
        assert!(!set.contains("k10000"));
        assert_eq!(set.len(), 10_000);
    }
}
