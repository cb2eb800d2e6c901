//! The upload ids a run has accepted recently, so a retried upload is not trained on
//! twice.

use std::collections::{HashSet, VecDeque};

/// Recently accepted `upload_id`s, so a retried upload is not trained on twice.
///
/// Bounded (the oldest id is forgotten first). A worker retries within seconds to
/// minutes, while the window holds the last `dedup_window` uploads (100,000 by default:
/// hours of a large fleet). A restart refills it from the write-ahead log
/// ([`crate::storage::wal`]), so a retry of a batch accepted just before a crash is still
/// recognised after it. An all-zero id means "no id": never treated as a repeat.
pub struct Dedup {
    cap: usize,
    seen: HashSet<[u8; 16]>,
    order: VecDeque<[u8; 16]>,
}

impl Dedup {
    pub fn new(cap: usize) -> Self {
        Dedup { cap: cap.max(1), seen: HashSet::new(), order: VecDeque::new() }
    }

    pub fn contains(&self, id: &[u8; 16]) -> bool {
        *id != [0; 16] && self.seen.contains(id)
    }

    pub fn insert(&mut self, id: [u8; 16]) {
        if id == [0; 16] || !self.seen.insert(id) {
            return;
        }
        self.order.push_back(id);
        if self.order.len() > self.cap {
            if let Some(old) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedup_forgets_the_oldest_first_and_ignores_zero_ids() {
        let mut d = Dedup::new(2);
        d.insert([1; 16]);
        d.insert([2; 16]);
        d.insert([1; 16]);
        assert!(d.contains(&[1; 16]) && d.contains(&[2; 16]));
        d.insert([3; 16]);
        assert!(!d.contains(&[1; 16]), "oldest forgotten");
        assert!(d.contains(&[2; 16]) && d.contains(&[3; 16]));
        d.insert([0; 16]);
        assert!(!d.contains(&[0; 16]));
    }
}
