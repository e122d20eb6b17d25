//! Volumes: small cells packed into large append-only files.
//!
//! A file per cell costs a creation, a rename, three fsyncs and an inode; a
//! cell of a few KiB is mostly that overhead. So cells up to the store's
//! pack limit are appended, as self-describing records (see `record`), to
//! the store's open volume, `volumes/<n>.vol`. One writer thread owns the
//! appends: every commit waiting when it wakes goes out in one write and one
//! `fdatasync` (group commit), and each is acknowledged only once that
//! returns. After it, the records' index entries are appended to `<n>.idx`
//! without a sync: the index is a cache, checked at start against the
//! volume, whose unindexed tail is scanned record by record (each checked
//! by its CRCs) and cut back at the first torn one.
//!
//! A delete appends a tombstone to `<n>.del` of the record's own volume and
//! syncs it, so a volume (its `.vol` and `.del`) always says by itself which
//! of its records are live. A volume grows to its size limit, then the
//! writer opens the next one.

mod load;
pub(crate) mod record;
mod writer;

pub(crate) use writer::NewCell;

use crate::error::StoreError;
use parking_lot::{Mutex, RwLock};
use record::RecordHead;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

/// Default size past which the writer starts a new volume.
pub const DEFAULT_VOLUME_MAX: u64 = 1 << 30;

/// Where a packed cell is: its volume and the offset of its record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Packed {
    /// The volume's number.
    pub volume: u32,
    /// Offset of the record's first byte in the volume.
    pub offset: u64,
    /// What the record's header says.
    pub head: RecordHead,
}

impl Packed {
    /// Offset of the cell's first data byte in the volume.
    pub fn data_offset(&self) -> u64 {
        self.offset + self.head.header_len()
    }
}

/// The bytes of one volume, all its records' and the live ones'.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VolumeUse {
    /// The volume's number.
    pub volume: u32,
    /// Bytes of records in it.
    pub bytes: u64,
    /// Bytes of the records not deleted.
    pub live: u64,
}

/// What the writer thread and the readers share.
struct Shared {
    dir: PathBuf,
    fsync: bool,
    volume_max: AtomicU64,
    /// The volume appended to (0: none yet).
    active: AtomicU32,
    /// A read-only descriptor of every volume, for readers.
    readers: RwLock<HashMap<u32, Arc<File>>>,
    usage: Mutex<BTreeMap<u32, VolumeUse>>,
    /// Bytes of deleted records in all volumes: `usage`'s sum of `bytes -
    /// live`, kept as it changes (gauges read it on every commit).
    garbage: AtomicU64,
}

impl Shared {
    fn path(&self, volume: u32, suffix: &str) -> PathBuf {
        file_path(&self.dir, volume, suffix)
    }
}

/// Path of volume `volume`'s file with `suffix` (`vol`, `idx` or `del`) in `dir`.
pub(crate) fn file_path(dir: &Path, volume: u32, suffix: &str) -> PathBuf {
    dir.join(format!("{volume:08}.{suffix}"))
}

/// The volumes of one store folder.
pub(crate) struct Volumes {
    shared: Arc<Shared>,
    jobs: mpsc::Sender<writer::Job>,
}

impl Volumes {
    /// Opens the volumes in `dir` (created if missing): checks each one's
    /// index against it, cuts torn tails, and answers the live cells.
    /// Starts the writer thread. Blocking.
    pub fn open(dir: PathBuf, fsync: bool) -> Result<(Self, Vec<Packed>), StoreError> {
        let loaded = load::load(&dir, fsync)?;
        let shared = Arc::new(Shared {
            dir,
            fsync,
            volume_max: AtomicU64::new(DEFAULT_VOLUME_MAX),
            active: AtomicU32::new(loaded.resume.as_ref().map_or(0, |a| a.id)),
            readers: RwLock::new(loaded.readers),
            garbage: AtomicU64::new(loaded.usage.values().map(|u| u.bytes - u.live).sum()),
            usage: Mutex::new(loaded.usage),
        });
        let (jobs, queue) = mpsc::channel();
        let writer = writer::Writer::new(
            shared.clone(),
            loaded.resume,
            loaded.next_volume,
            loaded.next_generation,
        );
        std::thread::Builder::new()
            .name("volume-writer".into())
            .spawn(move || writer.run(queue))
            .map_err(|e| StoreError::io("start the volume writer", e))?;
        Ok((Self { shared, jobs }, loaded.live))
    }

    /// Sets the size past which the writer starts a new volume.
    pub fn set_volume_max(&self, bytes: u64) {
        self.shared
            .volume_max
            .store(bytes.max(1), Ordering::Relaxed);
    }

    /// Appends `cell` and answers where it is, once it is durable.
    pub async fn append(&self, cell: NewCell) -> Result<Packed, StoreError> {
        let (reply, placed) = tokio::sync::oneshot::channel();
        let what = format!("append block {} to a volume", cell.key);
        let asked = std::time::Instant::now();
        let appended = self
            .send(writer::Job::Append { cell, reply }, placed, &what)
            .await;
        crate::telemetry::volume_append(asked.elapsed());
        appended
    }

    /// Durably deletes the packed cell `packed`.
    pub async fn delete(&self, packed: Packed) -> Result<(), StoreError> {
        let (reply, done) = tokio::sync::oneshot::channel();
        let key = packed.head.key;
        self.send(
            writer::Job::Delete { packed, reply },
            done,
            &format!("delete block {key} from volume {}", packed.volume),
        )
        .await
    }

    /// Removes volume `volume`, whose live records were all copied
    /// elsewhere (never the open one).
    pub async fn retire(&self, volume: u32) -> Result<(), StoreError> {
        let (reply, done) = tokio::sync::oneshot::channel();
        self.send(
            writer::Job::Retire { volume, reply },
            done,
            &format!("retire volume {volume}"),
        )
        .await
    }

    /// The volume appended to now (0: none yet).
    pub fn active(&self) -> u32 {
        self.shared.active.load(Ordering::Relaxed)
    }

    async fn send<T>(
        &self,
        job: writer::Job,
        answer: tokio::sync::oneshot::Receiver<std::io::Result<T>>,
        what: &str,
    ) -> Result<T, StoreError> {
        let stopped = || StoreError::io(what, std::io::Error::other("the volume writer stopped"));
        self.jobs.send(job).map_err(|_| stopped())?;
        answer
            .await
            .map_err(|_| stopped())?
            .map_err(|e| StoreError::io(what, e))
    }

    /// A read-only descriptor of volume `volume`.
    pub fn reader(&self, volume: u32) -> Option<Arc<File>> {
        self.shared.readers.read().get(&volume).cloned()
    }

    /// Path of volume `volume`'s records.
    pub fn path(&self, volume: u32) -> PathBuf {
        self.shared.path(volume, "vol")
    }

    /// Every volume's bytes, by number.
    pub fn usage(&self) -> Vec<VolumeUse> {
        self.shared.usage.lock().values().copied().collect()
    }

    /// Bytes of deleted records still in the volumes.
    pub fn garbage(&self) -> u64 {
        self.shared.garbage.load(Ordering::Relaxed)
    }

    /// Reads `packed`'s record whole and checks it: its chunk CRCs and its
    /// data. Blocking.
    pub fn read_record(&self, packed: &Packed) -> Result<(Vec<u32>, Vec<u8>), StoreError> {
        let (file, crcs) = self.open_record(packed)?;
        let mut data = vec![0u8; packed.head.length as usize];
        file.read_exact_at(&mut data, packed.data_offset())
            .map_err(|e| {
                StoreError::io(format!("read {}", self.path(packed.volume).display()), e)
            })?;
        proto::checksum::verify(&data, 0, packed.head.bytes_per_checksum, &crcs).map_err(|e| {
            StoreError::Corrupt {
                path: self.path(packed.volume),
                reason: format!("block {} at offset {}: {e}", packed.head.key, packed.offset),
            }
        })?;
        Ok((crcs, data))
    }

    /// Reads and checks the header of `packed`'s record: the volume's
    /// descriptor and the cell's chunk CRCs. Blocking.
    pub fn open_record(&self, packed: &Packed) -> Result<(Arc<File>, Vec<u32>), StoreError> {
        let path = || self.path(packed.volume);
        let file = self
            .reader(packed.volume)
            .ok_or_else(|| StoreError::Corrupt {
                path: path(),
                reason: "the volume is gone".into(),
            })?;
        let mut header = vec![0u8; packed.head.header_len() as usize];
        file.read_exact_at(&mut header, packed.offset)
            .map_err(|e| StoreError::io(format!("read {}", path().display()), e))?;
        let crcs = RecordHead::decode_fixed(&header)
            .filter(|head| *head == packed.head)
            .and_then(|head| record::check_header(&head, &header))
            .ok_or_else(|| StoreError::Corrupt {
                path: path(),
                reason: format!(
                    "the record of block {} at offset {} is damaged",
                    packed.head.key, packed.offset
                ),
            })?;
        Ok((file, crcs))
    }
}

/// The volume number in a file name `<n>.vol`.
fn volume_number(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".vol")?;
    (stem.len() == 8 && stem.bytes().all(|b| b.is_ascii_digit()))
        .then(|| stem.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests;
