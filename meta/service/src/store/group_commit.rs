//! Group commit: concurrent writes share one fsync.
//!
//! Each write transaction commits without syncing (redb's
//! `Durability::None`: visible, not yet on disk) and gets the next sequence
//! number; its writer then waits until a *flush* (an empty transaction
//! committed with `Durability::Immediate`, which makes every commit before
//! it durable) has covered that number. One waiting writer at a time flushes
//! for everyone: it first lets the writes already under way commit, so one
//! fsync covers all of them, and the commit rate grows with the number of
//! concurrent writers instead of being one fsync each. A writer that finds
//! no other writer and no flush under way commits with its own sync instead
//! (*solo*), which costs a lone writer what it cost before.
//!
//! A write is answered only once it is durable, and a read only once
//! everything it could have seen is (see [`GroupCommit::settle`]): no answer
//! rests on a commit that a crash could still undo. When the disk fails,
//! redb is opened again and every commit not yet flushed is gone; those
//! sequence numbers are recorded as lost, and their writers (and the reads
//! that could have seen them) fail.

use parking_lot::{Condvar, Mutex, RwLock};
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How meta's writes reach the disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Commits {
    /// Concurrent writes share one fsync.
    #[default]
    Grouped,
    /// Every write commits with its own fsync: the baseline the commit
    /// benchmark measures group commit against.
    OneByOne,
}

/// Longest a flushing writer waits for the writes under way to commit
/// before it syncs without them.
const GATHER_LIMIT: Duration = Duration::from_millis(2);

/// Losses remembered for the writers and reads still waiting on them; a
/// loss is a disk failure, after which writes pause for a second.
const LOSSES_KEPT: usize = 64;

/// Sequence numbers `after + 1 ..= upto` were committed, never flushed, and
/// undone when the database was opened again.
#[derive(Debug)]
struct Loss {
    /// Number of losses before this one.
    index: u64,
    after: u64,
    upto: u64,
    reason: String,
}

#[derive(Debug, Default)]
struct State {
    /// Every commit up to here is either durable or lost.
    settled: u64,
    /// Whether a writer is flushing (or gathering before it flushes).
    flushing: bool,
    /// Writers between the start of their transaction and its end.
    active: usize,
    /// Losses so far.
    losses_total: u64,
    recent_losses: VecDeque<Loss>,
}

impl State {
    /// The reason a loss recorded since the `since`-th undid one of the
    /// commits `lo..=hi`.
    fn loss_within(&self, since: u64, lo: u64, hi: u64) -> Option<&str> {
        self.recent_losses
            .iter()
            .find(|loss| loss.index >= since && loss.after < hi && loss.upto >= lo)
            .map(|loss| loss.reason.as_str())
    }
}

/// Where a caller starts depending on the store: losses recorded before it
/// do not concern it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mark(u64);

thread_local! {
    /// The last commit the reads made on this thread could have seen, since
    /// [`take_horizon_of`] last asked.
    static HORIZON: Cell<u64> = const { Cell::new(0) };
}

/// Runs `f` on this thread and returns, beside its result, the last commit
/// the reads it made could have seen: an answer built from them waits until
/// that one is settled ([`GroupCommit::settled`]).
pub(crate) fn take_horizon_of<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = HORIZON.take();
    let out = f();
    let horizon = HORIZON.replace(before);
    (out, horizon)
}

/// The sequence of commits and of flushes of one store.
pub(crate) struct GroupCommit {
    mode: Commits,
    /// Longest a flushing writer waits for the writes under way.
    gather_limit: Duration,
    /// Held to make a commit visible and number it, and to open a read
    /// snapshot and note the last number: so a snapshot never holds a
    /// commit without its number.
    numbering: RwLock<()>,
    /// Held from a commit until it is numbered.
    ordering: Mutex<()>,
    state: Mutex<State>,
    /// Wakes the writers waiting for their flush.
    settled_moved: Condvar,
    /// Wakes a flushing writer waiting for the writes under way.
    writer_ended: Condvar,
    /// `State::settled`, for readers that wait without a thread.
    settled: watch::Sender<u64>,
    /// `State::losses_total`, read without the lock.
    losses: AtomicU64,
    /// Commits so far: the last sequence number handed out. Moved under
    /// `state`'s lock; read without it on every read's path.
    committed: AtomicU64,
}

impl GroupCommit {
    pub(crate) fn new(mode: Commits) -> Self {
        Self::gathering_for(mode, GATHER_LIMIT)
    }

    fn gathering_for(mode: Commits, gather_limit: Duration) -> Self {
        Self {
            mode,
            gather_limit,
            numbering: RwLock::new(()),
            ordering: Mutex::new(()),
            state: Mutex::new(State::default()),
            settled_moved: Condvar::new(),
            writer_ended: Condvar::new(),
            settled: watch::Sender::new(0),
            losses: AtomicU64::new(0),
            committed: AtomicU64::new(0),
        }
    }

    /// Taken before a read or a write begins.
    pub(crate) fn mark(&self) -> Mark {
        Mark(self.losses.load(Ordering::Acquire))
    }

    /// The last sequence number handed out: everything a read begun now
    /// can see.
    pub(crate) fn latest(&self) -> u64 {
        self.committed.load(Ordering::Acquire)
    }

    /// A writer begins its transaction; whether it goes *solo*: with no
    /// other writer or flush under way, it commits with its own sync (one
    /// commit instead of a commit and a flush), which also makes durable
    /// every commit before it. Always in [`Commits::OneByOne`].
    pub(crate) fn begin(&self) -> bool {
        let mut state = self.state.lock();
        let solo = self.mode == Commits::OneByOne || (state.active == 0 && !state.flushing);
        state.active += 1;
        solo
    }

    /// Opens a read snapshot with `open` and notes, for this thread's
    /// [`take_horizon_of`], the last commit it can hold.
    pub(crate) fn snapshot<T>(&self, open: impl FnOnce() -> T) -> T {
        if self.mode == Commits::OneByOne {
            // Every commit is durable before it is visible.
            return open();
        }
        let _numbering = self.numbering.read();
        let snapshot = open();
        let latest = self.latest();
        HORIZON.set(HORIZON.get().max(latest));
        snapshot
    }

    /// Notes, for this thread's [`take_horizon_of`], every commit so far:
    /// what a read reuses from an earlier one may hold any of them.
    pub(crate) fn note_latest(&self) {
        if self.mode == Commits::Grouped {
            let latest = self.latest();
            HORIZON.set(HORIZON.get().max(latest));
        }
    }

    /// Ends a writer's transaction: `commit` commits it (when `f`
    /// succeeded), which gives it the next sequence number; a `solo` commit
    /// (see [`GroupCommit::begin`]) is durable, and so is every one before it.
    pub(crate) fn end<T, E>(
        &self,
        solo: bool,
        commit: impl FnOnce() -> Result<T, E>,
    ) -> Result<(T, u64), E> {
        // Commits are numbered in the order they commit.
        let _order = self.ordering.lock();
        // A solo commit is durable before it is visible: no read waits for it.
        let _numbering = (!solo).then(|| self.numbering.write());
        let committed = commit();
        let mut state = self.state.lock();
        state.active -= 1;
        // A flushing writer may be waiting for this one.
        self.writer_ended.notify_all();
        let out = committed?;
        metrics::counter!(crate::telemetry::COMMITS.name).increment(1);
        let seq = self.committed.fetch_add(1, Ordering::AcqRel) + 1;
        if solo {
            metrics::counter!(crate::telemetry::FLUSHES.name).increment(1);
            state.settled = state.settled.max(seq);
            self.publish(&state);
            self.settled_moved.notify_all();
        }
        Ok((out, seq))
    }

    /// Blocks until commits `lo..=hi` are settled, flushing when no other
    /// writer is; an error names the failure that undid one of them.
    /// `flush` makes every commit so far durable and returns the last
    /// sequence number it covered.
    pub(crate) fn settle(
        &self,
        mark: Mark,
        lo: u64,
        hi: u64,
        mut flush: impl FnMut() -> Result<u64, String>,
    ) -> Result<(), String> {
        let mut state = self.state.lock();
        loop {
            if state.settled >= hi {
                return match state.loss_within(mark.0, lo, hi) {
                    Some(reason) => Err(reason.to_string()),
                    None => Ok(()),
                };
            }
            if state.flushing {
                self.settled_moved.wait(&mut state);
                continue;
            }
            state.flushing = true;
            // Let the writes under way join this flush.
            let deadline = Instant::now() + self.gather_limit;
            while state.active > 0 {
                if self
                    .writer_ended
                    .wait_until(&mut state, deadline)
                    .timed_out()
                {
                    break;
                }
            }
            let flushed = parking_lot::MutexGuard::unlocked(&mut state, &mut flush);
            state.flushing = false;
            match flushed {
                Ok(upto) => {
                    metrics::counter!(crate::telemetry::FLUSHES.name).increment(1);
                    state.settled = state.settled.max(upto);
                }
                // The store records the loss when it reopens the database;
                // a flush that failed otherwise counts every commit not yet
                // flushed as lost, since none of them is known durable.
                Err(reason) => self.record_loss(&mut state, reason),
            }
            self.publish(&state);
            self.settled_moved.notify_all();
        }
    }

    /// Waits, without a thread, until every commit up to `hi` is settled;
    /// an error names a failure since `mark` that undid one of them.
    pub(crate) async fn settled(&self, mark: Mark, hi: u64) -> Result<(), String> {
        // What nearly every read finds: nothing to wait for, nothing lost.
        if *self.settled.borrow() >= hi && self.losses.load(Ordering::Acquire) == mark.0 {
            return Ok(());
        }
        let mut settled = self.settled.subscribe();
        // The sender lives as long as `self`, which the caller borrows.
        let _ = settled.wait_for(|&settled| settled >= hi).await;
        match self.state.lock().loss_within(mark.0, 1, hi) {
            Some(reason) => Err(reason.to_string()),
            None => Ok(()),
        }
    }

    /// The database was opened again after a disk failure: every commit not
    /// yet flushed is gone.
    pub(crate) fn lost(&self, reason: &str) {
        let mut state = self.state.lock();
        self.record_loss(&mut state, reason.to_string());
        self.publish(&state);
        self.settled_moved.notify_all();
    }

    /// Records every commit not yet settled as lost (none: nothing).
    fn record_loss(&self, state: &mut State, reason: String) {
        // Commits are numbered under `state`'s lock, held here.
        let committed = self.latest();
        if state.settled >= committed {
            return;
        }
        tracing::error!(
            commits = committed - state.settled,
            error = %reason,
            "metadata commits not yet flushed were lost"
        );
        let loss = Loss {
            index: state.losses_total,
            after: state.settled,
            upto: committed,
            reason,
        };
        state.losses_total += 1;
        self.losses.store(state.losses_total, Ordering::Release);
        if state.recent_losses.len() == LOSSES_KEPT {
            state.recent_losses.pop_front();
        }
        state.recent_losses.push_back(loss);
        state.settled = committed;
    }

    fn publish(&self, state: &State) {
        self.settled.send_if_modified(|settled| {
            let moved = *settled != state.settled;
            *settled = state.settled;
            moved
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier};

    /// Commits one write that is not solo and returns its sequence number.
    fn commit(commits: &GroupCommit) -> u64 {
        commits.begin();
        commits.end(false, || Ok::<_, ()>(())).unwrap().1
    }

    /// A flush that counts itself and covers every commit so far.
    fn counting_flush<'a>(
        commits: &'a GroupCommit,
        flushes: &'a AtomicU64,
    ) -> impl FnMut() -> Result<u64, String> + 'a {
        move || {
            flushes.fetch_add(1, Ordering::SeqCst);
            Ok(commits.latest())
        }
    }

    #[test]
    fn one_flush_settles_every_commit_made_before_it() {
        let commits = GroupCommit::new(Commits::Grouped);
        let flushes = AtomicU64::new(0);
        let mark = commits.mark();
        let seqs: Vec<u64> = (0..3).map(|_| commit(&commits)).collect();
        assert_eq!(seqs, [1, 2, 3]);
        for &seq in &seqs {
            commits
                .settle(mark, seq, seq, counting_flush(&commits, &flushes))
                .unwrap();
        }
        assert_eq!(flushes.load(Ordering::SeqCst), 1);
        // A commit after the flush needs one of its own.
        let fourth = commit(&commits);
        commits
            .settle(mark, fourth, fourth, counting_flush(&commits, &flushes))
            .unwrap();
        assert_eq!(flushes.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn concurrent_writers_share_one_flush() {
        const WRITERS: usize = 16;
        let commits = Arc::new(GroupCommit::new(Commits::Grouped));
        let flushes = Arc::new(AtomicU64::new(0));
        let committed = Arc::new(Barrier::new(WRITERS));
        let threads: Vec<_> = (0..WRITERS)
            .map(|_| {
                let (commits, flushes, committed) =
                    (commits.clone(), flushes.clone(), committed.clone());
                std::thread::spawn(move || {
                    let mark = commits.mark();
                    let seq = commit(&commits);
                    committed.wait();
                    commits.settle(mark, seq, seq, counting_flush(&commits, &flushes))
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap().unwrap();
        }
        assert_eq!(flushes.load(Ordering::SeqCst), 1);
        assert_eq!(commits.latest(), WRITERS as u64);
    }

    #[test]
    fn a_flush_waits_for_the_writes_under_way() {
        // Long enough that only the second writer's end lets the flush go.
        let commits = Arc::new(GroupCommit::gathering_for(
            Commits::Grouped,
            Duration::from_secs(60),
        ));
        let mark = commits.mark();
        let first = commit(&commits);
        // A second writer has begun its transaction and not yet committed.
        commits.begin();
        let (flushed, flushes) = std::sync::mpsc::channel();
        let waiter = {
            let commits = commits.clone();
            std::thread::spawn(move || {
                commits.settle(mark, first, first, || {
                    let upto = commits.latest();
                    flushed.send(upto).unwrap();
                    Ok(upto)
                })
            })
        };
        assert!(
            flushes.recv_timeout(Duration::from_millis(200)).is_err(),
            "flushed while a write was under way"
        );
        let (_, second) = commits.end(false, || Ok::<_, ()>(())).unwrap();
        // Its end lets the flush go at once, covering it.
        assert_eq!(flushes.recv_timeout(Duration::from_secs(10)), Ok(second));
        waiter.join().unwrap().unwrap();
        assert_eq!(
            commits.settle(mark, second, second, || panic!("covered")),
            Ok(())
        );
    }

    #[test]
    fn a_writer_is_alone_again_once_the_others_ended() {
        let commits = GroupCommit::new(Commits::Grouped);
        assert!(commits.begin());
        assert!(!commits.begin());
        commits.end(false, || Ok::<_, ()>(())).unwrap();
        commits.end(true, || Ok::<_, ()>(())).unwrap();
        assert!(commits.begin(), "both ended");
        commits.end(false, || Err::<(), _>(())).unwrap_err();
        assert!(commits.begin(), "a refused one ended too");
    }

    #[test]
    fn a_grouped_commit_is_numbered_before_a_snapshot_can_hold_it() {
        for solo in [false, true] {
            let commits = Arc::new(GroupCommit::new(Commits::Grouped));
            let (in_commit, committing) = std::sync::mpsc::channel();
            let (release, released) = std::sync::mpsc::channel::<()>();
            let writer = {
                let commits = commits.clone();
                std::thread::spawn(move || {
                    commits.begin();
                    commits.end(solo, || {
                        in_commit.send(()).unwrap();
                        released.recv().unwrap();
                        Ok::<_, ()>(())
                    })
                })
            };
            committing.recv().unwrap();
            let (opened, snapshots) = std::sync::mpsc::channel();
            let reader = {
                let commits = commits.clone();
                std::thread::spawn(move || {
                    let ((), horizon) = take_horizon_of(|| commits.snapshot(|| ()));
                    opened.send(horizon).unwrap();
                })
            };
            if solo {
                // Durable before visible: nothing to keep the reader from.
                assert_eq!(snapshots.recv_timeout(Duration::from_secs(10)), Ok(0));
                release.send(()).unwrap();
            } else {
                assert!(
                    snapshots.recv_timeout(Duration::from_millis(200)).is_err(),
                    "a snapshot opened while a grouped commit was unnumbered"
                );
                release.send(()).unwrap();
                assert_eq!(snapshots.recv_timeout(Duration::from_secs(10)), Ok(1));
            }
            writer.join().unwrap().unwrap();
            reader.join().unwrap();
        }
    }

    #[test]
    fn commits_undone_by_a_reopen_fail_their_writers_and_readers() {
        let commits = GroupCommit::new(Commits::Grouped);
        let before = commits.mark();
        let kept = commit(&commits);
        commits
            .settle(before, kept, kept, || Ok(commits.latest()))
            .unwrap();
        let mark = commits.mark();
        let lost: Vec<u64> = (0..2).map(|_| commit(&commits)).collect();
        commits.lost("No space left on device");
        for &seq in &lost {
            let answer = commits.settle(mark, seq, seq, || panic!("settled: no flush"));
            assert_eq!(answer, Err("No space left on device".to_string()));
        }
        // The commit flushed before the loss stands.
        assert_eq!(
            commits.settle(mark, kept, kept, || panic!("no flush")),
            Ok(())
        );
        // A read that could have seen the lost commits fails; one that began
        // after the loss does not hear of it.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert!(runtime.block_on(commits.settled(mark, lost[1])).is_err());
        assert_eq!(
            runtime.block_on(commits.settled(mark, kept)),
            Ok(()),
            "the read saw nothing lost"
        );
        let after = commits.mark();
        let next = commit(&commits);
        assert_eq!(next, 4);
        commits
            .settle(after, next, next, || Ok(commits.latest()))
            .unwrap();
        assert_eq!(runtime.block_on(commits.settled(after, next)), Ok(()));
        // A second loss leaves the first one's writers their answer.
        let again = commit(&commits);
        commits.lost("EIO");
        assert_eq!(
            commits.settle(after, again, again, || panic!("lost")),
            Err("EIO".to_string())
        );
        assert_eq!(
            commits.settle(mark, lost[0], lost[0], || panic!("lost")),
            Err("No space left on device".to_string())
        );
    }

    #[test]
    fn a_failed_flush_fails_the_commits_it_was_for() {
        let commits = GroupCommit::new(Commits::Grouped);
        let mark = commits.mark();
        let seq = commit(&commits);
        let answer = commits.settle(mark, seq, seq, || Err("EIO".to_string()));
        assert_eq!(answer, Err("EIO".to_string()));
        // Nothing waits for the failed ones any more.
        let next = commit(&commits);
        assert_eq!(
            commits.settle(commits.mark(), next, next, || Ok(commits.latest())),
            Ok(())
        );
    }

    #[test]
    fn reads_wait_for_the_flush_of_what_they_saw() {
        let commits = Arc::new(GroupCommit::new(Commits::Grouped));
        let mark = commits.mark();
        let seq = commit(&commits);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let early = runtime.block_on(async {
            tokio::time::timeout(Duration::from_millis(50), commits.settled(mark, seq)).await
        });
        assert!(early.is_err(), "a read settled before the flush");
        let writer = {
            let commits = commits.clone();
            std::thread::spawn(move || commits.settle(mark, seq, seq, || Ok(commits.latest())))
        };
        assert_eq!(runtime.block_on(commits.settled(mark, seq)), Ok(()));
        writer.join().unwrap().unwrap();
    }

    #[test]
    fn a_writer_alone_commits_durably_and_settles_those_before_it() {
        let commits = GroupCommit::new(Commits::Grouped);
        let mark = commits.mark();
        assert!(commits.begin(), "alone");
        // Another writer begins beside it: not alone.
        assert!(!commits.begin());
        let (_, beside) = commits.end(false, || Ok::<_, ()>(())).unwrap();
        let (_, solo) = commits.end(true, || Ok::<_, ()>(())).unwrap();
        assert!(beside < solo);
        // The solo commit's sync covered the one before it.
        for seq in [beside, solo] {
            assert_eq!(
                commits.settle(mark, seq, seq, || panic!("no flush")),
                Ok(())
            );
        }
        // While a flush is under way, a writer is not alone either.
        let pending = commit(&commits);
        let waiter = std::thread::scope(|scope| {
            let waiter = scope.spawn(|| {
                commits.settle(mark, pending, pending, || {
                    let alone = commits.begin();
                    commits.end(false, || Err::<(), _>(())).unwrap_err();
                    assert!(!alone, "a writer went solo during a flush");
                    Ok(commits.latest())
                })
            });
            waiter.join().unwrap()
        });
        assert_eq!(waiter, Ok(()));
    }

    #[test]
    fn one_by_one_commits_are_settled_when_they_commit() {
        let commits = GroupCommit::new(Commits::OneByOne);
        let mark = commits.mark();
        assert!(commits.begin(), "always solo");
        let seq = commits.end(true, || Ok::<_, ()>(())).unwrap().1;
        assert_eq!(
            commits.settle(mark, seq, seq, || panic!("one by one needs no flush")),
            Ok(())
        );
        let (_, horizon) = take_horizon_of(|| {
            commits.snapshot(|| ());
            commits.note_latest();
        });
        assert_eq!(horizon, 0, "nothing to wait for");
    }

    #[test]
    fn a_snapshot_notes_the_last_commit_it_can_hold() {
        let commits = GroupCommit::new(Commits::Grouped);
        commit(&commits);
        commit(&commits);
        let ((), outer) = take_horizon_of(|| {
            commits.snapshot(|| ());
            let ((), inner) = take_horizon_of(|| ());
            assert_eq!(inner, 0, "an inner call starts from nothing");
        });
        assert_eq!(outer, 2);
        let ((), reused) = take_horizon_of(|| commits.note_latest());
        assert_eq!(reused, 2, "a value reused from an earlier read");
        // A refused write is numbered nothing.
        commits.begin();
        let refused = commits.end(false, || Err::<(), _>("refused"));
        assert_eq!(refused, Err("refused"));
        assert_eq!(commits.latest(), 2);
    }
}
