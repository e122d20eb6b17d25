//! The thread that appends to the volumes: group commit.
//!
//! It sleeps until a job arrives, then takes every job waiting (up to
//! [`MAX_BATCH`] bytes) and serves them together: the appends as one write
//! to the open volume and one `fdatasync`, the deletes as one write and one
//! `fdatasync` per tombstone file. The more writers wait, the more each
//! sync carries.

use super::record::{self, RecordHead};
use super::{Packed, Shared, VolumeUse};
use bytes::Bytes;
use proto::{durable, BlockKey};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use tokio::sync::oneshot;

/// Bytes of records one group commit takes at most (one more job may pass it).
const MAX_BATCH: usize = 8 << 20;

/// What the writer is asked to do.
pub(super) enum Job {
    /// Append a cell.
    Append {
        cell: NewCell,
        reply: oneshot::Sender<io::Result<Packed>>,
    },
    /// Tombstone a packed cell.
    Delete { packed: Packed, reply: Done },
    /// Remove a volume whose live records were all copied elsewhere.
    Retire { volume: u32, reply: Done },
}

/// A cell to append: its key, its bytes (`pieces`, in order, `length` in
/// all) and the CRCs they were checked against.
pub(crate) struct NewCell {
    pub key: BlockKey,
    pub bytes_per_checksum: u32,
    pub length: u64,
    pub crcs: Vec<u32>,
    pub pieces: Vec<Bytes>,
}

impl Job {
    fn bytes(&self) -> usize {
        match self {
            Self::Append { cell, .. } => cell.length as usize,
            Self::Delete { .. } | Self::Retire { .. } => record::TOMBSTONE_LEN,
        }
    }
}

/// Where a delete or a retirement is answered.
type Done = oneshot::Sender<io::Result<()>>;

/// The volume appended to, with its index.
pub(super) struct Active {
    pub id: u32,
    pub file: File,
    pub len: u64,
    pub index: File,
    pub index_len: u64,
}

/// A tombstone file and its length.
struct Tombstones {
    file: File,
    len: u64,
}

pub(super) struct Writer {
    shared: Arc<Shared>,
    active: Option<Active>,
    next_volume: u32,
    next_generation: u64,
    tombstones: HashMap<u32, Tombstones>,
    buf: Vec<u8>,
}

impl Writer {
    pub fn new(
        shared: Arc<Shared>,
        resume: Option<Active>,
        next_volume: u32,
        next_generation: u64,
    ) -> Self {
        Self {
            shared,
            active: resume,
            next_volume,
            next_generation,
            tombstones: HashMap::new(),
            buf: Vec::new(),
        }
    }

    /// Serves jobs until every sender is gone.
    pub fn run(mut self, queue: mpsc::Receiver<Job>) {
        while let Ok(first) = queue.recv() {
            let mut bytes = first.bytes();
            let mut batch = vec![first];
            while bytes < MAX_BATCH {
                match queue.try_recv() {
                    Ok(job) => {
                        bytes += job.bytes();
                        batch.push(job);
                    }
                    Err(_) => break,
                }
            }
            crate::telemetry::volume_commit(batch.len());
            let (appends, others): (Vec<_>, Vec<_>) = batch
                .into_iter()
                .partition(|job| matches!(job, Job::Append { .. }));
            let (deletes, retires): (Vec<_>, Vec<_>) = others
                .into_iter()
                .partition(|job| matches!(job, Job::Delete { .. }));
            if !appends.is_empty() {
                self.append_all(appends);
            }
            if !deletes.is_empty() {
                self.delete_all(deletes);
            }
            for job in retires {
                if let Job::Retire { volume, reply } = job {
                    let _ = reply.send(self.retire(volume));
                }
            }
        }
    }

    fn append_all(&mut self, jobs: Vec<Job>) {
        let mut active = match self.take_active() {
            Ok(active) => active,
            Err(e) => {
                for job in jobs {
                    if let Job::Append { reply, .. } = job {
                        let _ = reply.send(Err(copy_error(&e)));
                    }
                }
                return;
            }
        };
        let committed_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.buf.clear();
        let mut placed = Vec::with_capacity(jobs.len());
        for job in jobs {
            let Job::Append { cell, reply } = job else {
                continue;
            };
            let NewCell {
                key,
                bytes_per_checksum,
                length,
                crcs,
                pieces,
            } = cell;
            let head = RecordHead {
                key,
                bytes_per_checksum,
                length,
                generation: self.next_generation,
                committed_ms,
            };
            self.next_generation += 1;
            let offset = active.len + self.buf.len() as u64;
            head.encode(&crcs, &mut self.buf);
            for piece in &pieces {
                self.buf.extend_from_slice(piece);
            }
            let packed = Packed {
                volume: active.id,
                offset,
                head,
            };
            placed.push((packed, reply));
        }
        let written = active
            .file
            .write_all_at(&self.buf, active.len)
            .and_then(|()| match self.shared.fsync {
                true => active.file.sync_data(),
                false => Ok(()),
            });
        if let Err(e) = written {
            tracing::error!(volume = active.id, error = %e, "appending to a volume failed");
            // Whatever reached the file is cut off; a volume that cannot
            // even be cut is appended to no more (the next start checks it).
            if active.file.set_len(active.len).is_ok() {
                self.active = Some(active);
            }
            for (_, reply) in placed {
                let _ = reply.send(Err(copy_error(&e)));
            }
            return;
        }
        active.len += self.buf.len() as u64;
        let mut entries = Vec::with_capacity(placed.len() * record::INDEX_ENTRY_LEN);
        for (packed, _) in &placed {
            entries.extend_from_slice(&packed.head.index_entry(packed.offset));
        }
        // The index is a cache: a failed write only means a longer scan at start.
        match active.index.write_all_at(&entries, active.index_len) {
            Ok(()) => active.index_len += entries.len() as u64,
            Err(e) => {
                tracing::warn!(volume = active.id, error = %e, "could not extend a volume's index")
            }
        }
        {
            let mut usage = self.shared.usage.lock();
            let volume = usage.entry(active.id).or_insert(VolumeUse {
                volume: active.id,
                ..VolumeUse::default()
            });
            volume.bytes = active.len;
            volume.live += placed.iter().map(|(p, _)| p.head.record_len()).sum::<u64>();
        }
        self.active = Some(active);
        for (packed, reply) in placed {
            let _ = reply.send(Ok(packed));
        }
    }

    /// The volume to append to, taken out until the appends are done: the
    /// open one, or a new one when there is none or it has reached the size
    /// limit.
    fn take_active(&mut self) -> io::Result<Active> {
        let max = self.shared.volume_max.load(Ordering::Relaxed);
        match self.active.take() {
            Some(active) if active.len < max => Ok(active),
            _ => self.create_volume(),
        }
    }

    /// Removes volume `volume` (never the open one): its records, index and
    /// tombstones, in that order, so that a crash part way leaves either
    /// the whole volume or files that are ignored and cleared at start.
    fn retire(&mut self, volume: u32) -> io::Result<()> {
        if self.active.as_ref().is_some_and(|a| a.id == volume) {
            return Err(io::Error::other("the open volume cannot be retired"));
        }
        self.tombstones.remove(&volume);
        self.shared.readers.write().remove(&volume);
        if let Some(gone) = self.shared.usage.lock().remove(&volume) {
            self.shared
                .garbage
                .fetch_sub(gone.bytes - gone.live, Ordering::Relaxed);
        }
        for suffix in ["vol", "idx", "del"] {
            match std::fs::remove_file(self.shared.path(volume, suffix)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        if self.shared.fsync {
            durable::sync_dir(&self.shared.dir)?;
        }
        tracing::info!(volume, dir = %self.shared.dir.display(), "volume retired");
        Ok(())
    }

    fn create_volume(&mut self) -> io::Result<Active> {
        let id = self.next_volume;
        self.next_volume += 1;
        let create = |suffix| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(self.shared.path(id, suffix))
        };
        let file = create("vol")?;
        let index = create("idx")?;
        if self.shared.fsync {
            durable::sync_dir(&self.shared.dir)?;
        }
        let reader = File::open(self.shared.path(id, "vol"))?;
        self.shared.readers.write().insert(id, Arc::new(reader));
        self.shared.active.store(id, Ordering::Relaxed);
        self.shared.usage.lock().insert(
            id,
            VolumeUse {
                volume: id,
                ..VolumeUse::default()
            },
        );
        tracing::info!(volume = id, dir = %self.shared.dir.display(), "new volume");
        Ok(Active {
            id,
            file,
            len: 0,
            index,
            index_len: 0,
        })
    }

    fn delete_all(&mut self, jobs: Vec<Job>) {
        let mut by_volume: HashMap<u32, Vec<(Packed, Done)>> = HashMap::new();
        for job in jobs {
            if let Job::Delete { packed, reply } = job {
                by_volume
                    .entry(packed.volume)
                    .or_default()
                    .push((packed, reply));
            }
        }
        for (volume, deletes) in by_volume {
            let mut stones = Vec::with_capacity(deletes.len() * record::TOMBSTONE_LEN);
            for (packed, _) in &deletes {
                stones
                    .extend_from_slice(&record::tombstone(packed.head.key, packed.head.generation));
            }
            let result = self.append_tombstones(volume, &stones);
            if result.is_ok() {
                let freed: u64 = deletes.iter().map(|(p, _)| p.head.record_len()).sum();
                if let Some(usage) = self.shared.usage.lock().get_mut(&volume) {
                    let live = usage.live.saturating_sub(freed);
                    self.shared
                        .garbage
                        .fetch_add(usage.live - live, Ordering::Relaxed);
                    usage.live = live;
                }
            }
            for (_, reply) in deletes {
                let _ = reply.send(match &result {
                    Ok(()) => Ok(()),
                    Err(e) => Err(copy_error(e)),
                });
            }
        }
    }

    fn append_tombstones(&mut self, volume: u32, stones: &[u8]) -> io::Result<()> {
        if !self.shared.readers.read().contains_key(&volume) {
            // Retired: its records are gone with it.
            return Ok(());
        }
        if !self.tombstones.contains_key(&volume) {
            let path = self.shared.path(volume, "del");
            let existed = path.exists();
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)?;
            if !existed && self.shared.fsync {
                durable::sync_dir(&self.shared.dir)?;
            }
            let len = file.metadata()?.len();
            self.tombstones.insert(volume, Tombstones { file, len });
        }
        let target = self.tombstones.get_mut(&volume).expect("just inserted");
        let written =
            target
                .file
                .write_all_at(stones, target.len)
                .and_then(|()| match self.shared.fsync {
                    true => target.file.sync_data(),
                    false => Ok(()),
                });
        match written {
            Ok(()) => {
                target.len += stones.len() as u64;
                Ok(())
            }
            Err(e) => {
                tracing::error!(volume, error = %e, "writing tombstones failed");
                let _ = target.file.set_len(target.len);
                Err(e)
            }
        }
    }
}

/// The same error again, for each of the jobs it failed.
fn copy_error(e: &io::Error) -> io::Error {
    io::Error::new(e.kind(), e.to_string())
}
