//! Positioned reads of each object a client reads: how many are in flight
//! and when the last one ended, so that sequential streams of the same object
//! yield to them (see `sequential`).

use proto::ids::ObjectId;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long after its last positioned read a reader still counts as shared.
pub(crate) const CONTENDED_FOR: Duration = Duration::from_millis(50);

/// Positioned reads of one [`KeyReader`](crate::KeyReader): how many are in flight and when
/// the last one ended, for sequential streams to yield to them.
#[derive(Debug)]
pub(crate) struct PositionedActivity {
    in_flight: AtomicUsize,
    /// When the last positioned read ended, in nanoseconds after `epoch`.
    last_end: AtomicU64,
    epoch: Instant,
}

impl Default for PositionedActivity {
    fn default() -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            last_end: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }
}

impl PositionedActivity {
    /// Counts a positioned read until the returned guard drops.
    pub(crate) fn start(&self) -> PositionedRead<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        PositionedRead(self)
    }

    fn nanos_now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Whether positioned reads are in flight or ended within [`CONTENDED_FOR`].
    pub(crate) fn contended(&self) -> bool {
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            return true;
        }
        let last = self.last_end.load(Ordering::Relaxed);
        last != 0 && self.nanos_now().saturating_sub(last) < CONTENDED_FOR.as_nanos() as u64
    }
}

/// The [`PositionedActivity`] of each object a client has readers of, so
/// that every reader of one object sees the others' positioned reads.
#[derive(Debug, Default)]
pub(crate) struct PositionedActivities {
    objects: parking_lot::Mutex<ActivityMap>,
}

#[derive(Debug, Default)]
struct ActivityMap {
    by_object: std::collections::HashMap<ObjectId, std::sync::Weak<PositionedActivity>>,
    /// Entries after the last sweep of dropped ones.
    swept_at: usize,
}

impl PositionedActivities {
    /// The activity shared by every live reader of `object`.
    pub(crate) fn of(&self, object: ObjectId) -> Arc<PositionedActivity> {
        let mut map = self.objects.lock();
        if let Some(live) = map.by_object.get(&object).and_then(|w| w.upgrade()) {
            return live;
        }
        let activity = Arc::new(PositionedActivity::default());
        map.by_object.insert(object, Arc::downgrade(&activity));
        // Sweeping when the map doubles keeps it within twice the live readers.
        if map.by_object.len() > 2 * map.swept_at.max(16) {
            map.by_object.retain(|_, w| w.strong_count() > 0);
            map.swept_at = map.by_object.len();
        }
        activity
    }
}

/// One positioned read in flight; see [`PositionedActivity::start`].
pub(crate) struct PositionedRead<'a>(&'a PositionedActivity);

impl Drop for PositionedRead<'_> {
    fn drop(&mut self) {
        let activity = self.0;
        activity
            .last_end
            .store(activity.nanos_now().max(1), Ordering::Relaxed);
        activity.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_positioned_read_in_flight_makes_the_reader_contended() {
        let activity = PositionedActivity::default();
        assert!(!activity.contended(), "no positioned read yet");
        let first = activity.start();
        let second = activity.start();
        assert!(activity.contended());
        drop(first);
        assert!(activity.contended(), "one still in flight");
        drop(second);
        assert_eq!(activity.in_flight.load(Ordering::Relaxed), 0);
        assert_ne!(
            activity.last_end.load(Ordering::Relaxed),
            0,
            "the end is recorded"
        );
    }

    #[test]
    fn readers_of_one_object_share_its_activity_and_others_do_not() {
        let activities = PositionedActivities::default();
        let (a, b) = (
            ObjectId(uuid::Uuid::from_u128(1)),
            ObjectId(uuid::Uuid::from_u128(2)),
        );
        let first = activities.of(a);
        let second = activities.of(a);
        let read = second.start();
        assert!(
            first.contended(),
            "a read through another reader of the object"
        );
        assert!(!activities.of(b).contended(), "another object");
        drop(read);
        drop((first, second));
        for n in 0..100u128 {
            activities.of(ObjectId(uuid::Uuid::from_u128(n + 10)));
        }
        assert!(
            activities.objects.lock().by_object.len() <= 64,
            "dropped entries are swept"
        );
    }
}
