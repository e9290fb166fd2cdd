//! The sequences of a client by name, read on every `Client::next` with no
//! lock and no read-modify-write: plain acquire loads.
//!
//! A client never forgets a sequence, so the map only grows: it is a list of
//! open-addressing tables (segments) of doubling sizes, each slot written
//! once (a `OnceLock`). A name goes into the newest segment while that one is
//! at most half full, else into a new segment twice as large; a look-up
//! probes the segments in order, oldest (and most used) first. Nothing is
//! ever moved or freed while the client lives, so a reader needs no guard,
//! and inserts (rare: once per name) are serialized by a mutex.

use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::buffer::Buffer;

/// Segment `i` has `FIRST << i` slots; 32 segments are more than any
/// client could fill.
const SEGMENTS: usize = 32;
const FIRST: usize = 16;

pub(crate) struct Names {
    segments: [OnceLock<Segment>; SEGMENTS],
    hasher: foldhash::fast::RandomState,
    adding: Mutex<Adding>,
}

struct Segment {
    slots: Box<[OnceLock<Arc<Buffer>>]>,
}

/// What only inserts touch.
#[derive(Default)]
pub(crate) struct Adding {
    /// The segment names go into, and how many it holds.
    segment: usize,
    used: usize,
    /// Set by the close: no more names.
    pub closed: bool,
}

impl Segment {
    fn new(i: usize) -> Segment {
        Segment {
            slots: (0..FIRST << i).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The slot of `name` (`Ok`), or the empty slot it would go in (`Err`).
    #[inline]
    fn find(&self, hash: u64, name: &str) -> Result<&Arc<Buffer>, usize> {
        let mask = self.slots.len() - 1;
        let mut i = hash as usize & mask;
        loop {
            match self.slots[i].get() {
                None => return Err(i),
                Some(b) if b.name() == name => return Ok(b),
                Some(_) => i = (i + 1) & mask,
            }
        }
    }
}

impl Default for Names {
    fn default() -> Self {
        Names {
            segments: std::array::from_fn(|_| OnceLock::new()),
            hasher: foldhash::fast::RandomState::default(),
            adding: Mutex::new(Adding::default()),
        }
    }
}

impl Names {
    /// The buffer of `name`, if the client has one.
    #[inline]
    pub(crate) fn get(&self, name: &str) -> Option<&Arc<Buffer>> {
        let hash = self.hasher.hash_one(name);
        for segment in &self.segments {
            // Segments are made in order: the first missing ends the search.
            match segment.get()?.find(hash, name) {
                Ok(b) => return Some(b),
                Err(_) => continue,
            }
        }
        None
    }

    /// The lock of inserts (and of the close's flag).
    pub(crate) fn adding(&self) -> MutexGuard<'_, Adding> {
        self.adding.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The buffer of `name`, made by `make` if there is none yet; `None`
    /// once closed. `adding` is [`Names::adding`]'s guard.
    pub(crate) fn get_or_insert(
        &self,
        adding: &mut Adding,
        name: &str,
        make: impl FnOnce() -> Buffer,
    ) -> Option<Arc<Buffer>> {
        if let Some(b) = self.get(name) {
            return Some(b.clone());
        }
        if adding.closed {
            return None;
        }
        let hash = self.hasher.hash_one(name);
        let mut segment = self.segments[adding.segment].get_or_init(|| Segment::new(0));
        // At most half full: a probe always meets an empty slot.
        if (adding.used + 1) * 2 > segment.slots.len() {
            adding.segment += 1;
            adding.used = 0;
            let i = adding.segment;
            segment = self.segments[i].get_or_init(|| Segment::new(i));
        }
        let Err(slot) = segment.find(hash, name) else {
            unreachable!("checked above under the lock: not in any segment");
        };
        let buffer = Arc::new(make());
        // Only inserts set slots, under the lock: this one is still empty.
        let _ = segment.slots[slot].set(buffer.clone());
        adding.used += 1;
        Some(buffer)
    }

    /// Every buffer, oldest first.
    pub(crate) fn all(&self) -> Vec<Arc<Buffer>> {
        self.segments
            .iter()
            .map_while(|s| s.get())
            .flat_map(|s| s.slots.iter().filter_map(|b| b.get().cloned()))
            .collect()
    }

    /// How many sequences the client has.
    pub(crate) fn len(&self) -> usize {
        self.segments
            .iter()
            .map_while(|s| s.get())
            .map(|s| s.slots.iter().filter(|b| b.get().is_some()).count())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::Shared;
    use crate::transport::Transport;
    use seqd_core::domain::SeqName;
    use std::time::Duration;

    #[test]
    fn every_name_is_found_across_segments_and_none_twice() {
        let transport = Transport::new(
            vec!["http://127.0.0.1:1".into()],
            None,
            None,
            Duration::from_secs(1),
            &Default::default(),
        )
        .unwrap();
        let shared = Arc::new(Shared {
            transport,
            prefetch_ratio: 0.5,
            retry_after: Duration::from_millis(1),
        });
        let names = Names::default();
        assert!(names.get("a").is_none());
        let n = 1000;
        let mut made = Vec::new();
        for i in 0..n {
            let name = format!("s{i}");
            let b = names
                .get_or_insert(&mut names.adding(), &name, || {
                    Buffer::new(SeqName::parse(&name).unwrap(), shared.clone())
                })
                .unwrap();
            made.push(b);
        }
        assert_eq!(names.len(), n);
        for (i, b) in made.iter().enumerate() {
            let got = names.get(&format!("s{i}")).unwrap();
            assert!(Arc::ptr_eq(got, b), "s{i}");
            let again = names
                .get_or_insert(&mut names.adding(), &format!("s{i}"), || unreachable!())
                .unwrap();
            assert!(Arc::ptr_eq(&again, b));
        }
        assert!(names.get("s1000").is_none());
        assert_eq!(names.all().len(), n);
        names.adding().closed = true;
        let closed = names.get_or_insert(&mut names.adding(), "late", || unreachable!());
        assert!(closed.is_none());
        assert!(names
            .get_or_insert(&mut names.adding(), "s5", || unreachable!())
            .is_some());
    }
}
