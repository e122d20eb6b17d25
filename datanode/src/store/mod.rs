//! Block files on local disk.
//!
//! A committed block is kept one of two ways. Up to the pack limit it is a
//! record in a volume (see `volumes`): its upload is held in memory, CRCs
//! verified on arrival, and the commit appends it to the open volume,
//! sharing one write and one fdatasync with every commit waiting then.
//! Past the limit it is a plain data file holding only the block's bytes,
//! plus a checksum sidecar (see the `sidecar` module): the upload appends
//! to a temporary file under `tmp/`, and the commit writes the sidecar,
//! fsyncs both files, renames them into their shard folder and fsyncs that.
//! Either way any range goes out with one sendfile call, from the file's
//! offset where the block starts.
//!
//! Every disk access runs on tokio's blocking pool or the volume writer.

mod compact;
pub(crate) mod direct;
mod disks;
mod paths;
mod recovery;
mod scrub;
pub(crate) mod sidecar;
mod uploads;
pub mod volumes;

pub use compact::Compacted;
pub use disks::{default_failed_disks_tolerated, DiskStatus};
pub use scrub::Verified;

use uploads::sync_shard;

use crate::error::StoreError;
use crate::telemetry;
use bytes::Bytes;
use disks::{means_disk_failure, Disk};
use parking_lot::{Mutex, RwLock};
use paths::Paths;
use proto::checksum::{self, ChecksumError};
use proto::wire::{ReadData, MAX_PAYLOAD_LEN};
use proto::{BlockKey, DatanodeId};
use sidecar::SidecarHeader;
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use volumes::{NewCell, Packed, Volumes};

/// What the store knows of a committed block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockMeta {
    /// Bytes in the block.
    pub length: u64,
    /// Bytes covered by each CRC in its sidecar.
    pub bytes_per_checksum: u32,
}

/// Totals reported to meta and exported as gauges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Committed blocks.
    pub blocks: u64,
    /// Bytes of committed block data.
    pub used: u64,
    /// Committed blocks packed in volumes (the rest have files of their own).
    pub packed: u64,
    /// Bytes of deleted records the volumes still hold.
    pub garbage: u64,
}

/// A chunk-aligned range of a committed block, ready to send: the read reply
/// header (CRCs included) and the open file the bytes come from.
#[derive(Debug)]
pub struct BlockRange {
    /// The reply header: range actually sent and its CRCs.
    pub header: ReadData,
    /// The file holding the block, opened before the reply starts (a
    /// concurrent delete cannot pull it away mid-reply).
    pub file: Arc<File>,
    /// Offset in `file` of the block's first byte.
    pub base: u64,
}

/// A committed block opened whole: what a reader needs to serve any range.
#[derive(Debug)]
pub struct OpenedBlock {
    /// What the index says of it.
    pub meta: BlockMeta,
    /// Its data file, or the volume holding it.
    pub file: Arc<File>,
    /// Offset in `file` of the block's first byte.
    pub base: u64,
    /// The CRC of every chunk.
    pub crcs: Vec<u32>,
}

/// Where a committed block's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// Its own data file and sidecar.
    File,
    /// A record in a volume.
    Packed(Packed),
}

/// A committed block in the index.
#[derive(Clone, Copy, Debug)]
struct Stored {
    meta: BlockMeta,
    /// The disk holding it.
    disk: u16,
    place: Place,
}

/// An upload in progress.
struct OpenBlock {
    /// Distinguishes this upload's temporary files from any other of the same key.
    upload: u64,
    /// The disk of its temporary file, once it has one.
    disk: Option<Arc<Disk>>,
    file: Option<Arc<File>>,
    /// The same file opened with O_DIRECT, for aligned writes (see `direct`).
    direct: Option<Arc<File>>,
    /// The disk write of the last piece, still running: a write is
    /// acknowledged once its CRCs are verified, and the next write (or the
    /// commit) waits for it first. So the network transfer of one piece
    /// overlaps the disk write of the one before, and at most one piece per
    /// upload waits in memory for the disk.
    writing: Option<tokio::task::JoinHandle<Result<(), StoreError>>>,
    len: u64,
    bytes_per_checksum: u32,
    crcs: Vec<u32>,
    /// The data so far, while the upload fits the pack limit and so has no
    /// file yet.
    pieces: Vec<Bytes>,
    touched: Instant,
    /// Committed or discarded: whoever still holds this handle must look again.
    closed: bool,
}

type OpenHandle = Arc<tokio::sync::Mutex<OpenBlock>>;

/// Committed blocks of one disk, counted as the index changes.
#[derive(Clone, Copy, Debug, Default)]
struct Totals {
    blocks: u64,
    used: u64,
    packed: u64,
}

struct Index {
    blocks: HashMap<BlockKey, Stored>,
    /// By disk number.
    totals: Vec<Totals>,
}

impl Index {
    fn insert(&mut self, key: BlockKey, stored: Stored) {
        let totals = &mut self.totals[usize::from(stored.disk)];
        totals.blocks += 1;
        totals.used += stored.meta.length;
        if let Place::Packed(_) = stored.place {
            totals.packed += 1;
        }
        if let Some(old) = self.blocks.insert(key, stored) {
            self.counted_out(&old);
        }
    }

    fn remove(&mut self, key: &BlockKey) -> Option<Stored> {
        let removed = self.blocks.remove(key)?;
        self.counted_out(&removed);
        Some(removed)
    }

    fn counted_out(&mut self, stored: &Stored) {
        let totals = &mut self.totals[usize::from(stored.disk)];
        totals.blocks -= 1;
        totals.used -= stored.meta.length;
        if let Place::Packed(_) = stored.place {
            totals.packed -= 1;
        }
    }
}

/// The block files of one datanode, on one disk or several.
pub struct BlockStore {
    /// By number: a disk's place in the list the store was opened with.
    disks: Vec<Arc<Disk>>,
    id: DatanodeId,
    default_bytes_per_checksum: u32,
    fsync: bool,
    index: RwLock<Index>,
    /// Failed disks the store serves on past; one more raises `disks_lost`.
    failed_disks_tolerated: AtomicUsize,
    /// Turns true once more disks failed than are tolerated.
    disks_lost: tokio::sync::watch::Sender<bool>,
    /// Blocks lost with a failed disk, and why, not yet handed to meta.
    lost: Mutex<Vec<(BlockKey, String)>>,
    /// Turns of the disks taking new blocks.
    next_disk: AtomicUsize,
    /// Blocks up to this many bytes are packed; 0 packs none.
    pack_max: AtomicU64,
    open: Mutex<HashMap<BlockKey, OpenHandle>>,
    next_upload: AtomicU64,
    /// Keys of committed blocks as they are deleted, for short-circuit
    /// watchers holding their open data files (see `crate::local`).
    removals: tokio::sync::broadcast::Sender<BlockKey>,
    /// The Unix socket serving this store's files to local clients, if any.
    local_socket: RwLock<Option<PathBuf>>,
    /// Aligned writes bypass the page cache (see `direct`); turned off by
    /// configuration, or for good by a file system that refuses O_DIRECT.
    direct_writes: AtomicBool,
    /// Disk writes running at once, whatever the number of uploads: a disk
    /// fed 80 concurrent direct writes (16 writers, 5 block files each)
    /// moved a third less than one fed 5 on the machines measured here, so
    /// further uploads wait their turn (and their writers with them).
    disk_writes: Arc<tokio::sync::Semaphore>,
    /// The permits `disk_writes` was given.
    max_disk_writes: AtomicUsize,
}

/// Disks with at least this share less room than the roomiest still count
/// as roomiest when a new block picks its disk (see `choose_disk`).
const ROOM_SPREAD: f64 = 0.25;

/// Default number of disk writes a store runs at once.
pub const DEFAULT_DISK_WRITES: usize = 4;

/// Default [`BlockStore::set_pack_max`]: blocks up to 1 MiB are packed into
/// volumes (docs/benchmarks.md has the measurement behind it).
pub const DEFAULT_PACK_MAX: u64 = 1 << 20;

/// Deletions buffered per short-circuit watcher before it counts as lagging.
const REMOVALS_BUFFER: usize = 4096;

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StoreError::io("disk task", std::io::Error::other(e.to_string())))?
}

/// Opens block `key`'s data file and sidecar, checks both against `meta`
/// (what the index says), and reads the CRCs of `count` chunks from `first`.
fn open_checked(
    key: BlockKey,
    meta: BlockMeta,
    data_path: &Path,
    sidecar_path: &Path,
    first: u64,
    count: u64,
) -> Result<(File, Vec<u32>), StoreError> {
    let open = |path: &Path| {
        File::open(path).map_err(|e| match e.kind() {
            // Deleted since the index lookup.
            ErrorKind::NotFound => StoreError::NotFound(key),
            _ => StoreError::io(format!("open {}", path.display()), e),
        })
    };
    let file = open(data_path)?;
    let sidecar = open(sidecar_path)?;
    let corrupt = |reason: String| StoreError::Corrupt {
        path: sidecar_path.to_path_buf(),
        reason,
    };
    let header = SidecarHeader::read(&sidecar).map_err(corrupt)?;
    if header.length != meta.length || header.bytes_per_checksum != meta.bytes_per_checksum {
        return Err(corrupt("sidecar changed since the block was loaded".into()));
    }
    let data_len = file
        .metadata()
        .map_err(|e| StoreError::io(format!("stat {}", data_path.display()), e))?
        .len();
    if data_len != meta.length {
        return Err(StoreError::Corrupt {
            path: data_path.to_path_buf(),
            reason: format!("{data_len} bytes, the sidecar records {}", meta.length),
        });
    }
    let crcs = sidecar::read_crcs(&sidecar, first, count)
        .map_err(|e| corrupt(format!("reading checksums: {e}")))?;
    Ok((file, crcs))
}

fn remove_if_present(path: &Path) -> Result<(), StoreError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != ErrorKind::NotFound => {
            Err(StoreError::io(format!("remove {}", path.display()), e))
        }
        _ => Ok(()),
    }
}

/// One disk as found at start: opened, or failed with why.
type OpenedDisk = Result<(Paths, Volumes, recovery::Recovered, Vec<Packed>), (Paths, String)>;

/// Opens the disk over `paths` for datanode `id`: its folders, identity,
/// committed blocks and volumes. Blocking.
fn open_disk(paths: &Paths, id: &DatanodeId, fsync: bool) -> Result<OpenedDisk, StoreError> {
    let opened = recovery::prepare_folders(paths)
        .and_then(|()| recovery::load_or_create_identity(paths, Some(id)))
        .and_then(|_| recovery::load_blocks(paths))
        .and_then(|recovered| {
            let (volumes, packed) = Volumes::open(paths.volumes.clone(), fsync)?;
            Ok((paths.clone(), volumes, recovered, packed))
        });
    match opened {
        Ok(opened) => Ok(Ok(opened)),
        Err(e) if means_disk_failure(&e) => Ok(Err((paths.clone(), e.to_string()))),
        Err(e) => Err(e),
    }
}

impl BlockStore {
    /// Opens (creating if needed) the store in `dir`: wipes unfinished uploads,
    /// loads the committed blocks (quarantining inconsistent ones) and the
    /// datanode identity. `bytes_per_checksum` is the chunk size of blocks
    /// committed without any write (empty internal blocks); writes name their
    /// own. With `fsync` false nothing is fsynced (tests, throwaway clusters).
    pub async fn open(
        dir: impl Into<PathBuf>,
        bytes_per_checksum: u32,
        fsync: bool,
    ) -> Result<Arc<Self>, StoreError> {
        Self::open_disks(vec![dir.into()], bytes_per_checksum, fsync, None).await
    }

    /// The id of the datanode whose data folder `dir` is, if it has been
    /// opened before (blocking: reads one small file).
    pub fn identity_in(dir: impl Into<PathBuf>) -> Result<Option<DatanodeId>, StoreError> {
        recovery::read_identity(&Paths::new(dir.into()))
    }

    /// [`Self::open`] over the disks `dirs` (one folder each) for the
    /// datanode `identity` (its credential's): fresh disks take that id (or
    /// the one the others hold), a disk of another datanode is refused. A
    /// disk that fails as it opens is out of service from the start, its
    /// blocks unknown; when every disk fails, so does the open.
    pub async fn open_disks(
        dirs: Vec<PathBuf>,
        bytes_per_checksum: u32,
        fsync: bool,
        identity: Option<DatanodeId>,
    ) -> Result<Arc<Self>, StoreError> {
        checksum::validate_bytes_per_checksum(bytes_per_checksum)
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        if dirs.is_empty() || dirs.len() > usize::from(u16::MAX) {
            return Err(StoreError::Invalid(format!(
                "a datanode needs from 1 to {} data folders, not {}",
                u16::MAX,
                dirs.len()
            )));
        }
        let all: Vec<Paths> = dirs.into_iter().map(Paths::new).collect();
        let (id, opened) = blocking(move || {
            let id = recovery::agree_on_identity(&all, identity.as_ref())?;
            let opened = all
                .iter()
                .map(|paths| open_disk(paths, &id, fsync))
                .collect::<Result<Vec<_>, _>>()?;
            Ok((id, opened))
        })
        .await?;
        let mut disks = Vec::with_capacity(opened.len());
        let mut index = Index {
            blocks: HashMap::new(),
            totals: vec![Totals::default(); opened.len()],
        };
        for (number, opened) in opened.into_iter().enumerate() {
            let number = number as u16;
            let (paths, volumes, recovered, packed) = match opened {
                Ok(opened) => opened,
                Err((paths, reason)) => {
                    tracing::error!(disk = %paths.root.display(), %reason, "disk failed as it opened; serving without it");
                    disks.push(Arc::new(Disk::failed(number, paths, reason)));
                    continue;
                }
            };
            let found = recovered
                .blocks
                .into_iter()
                .map(|(key, meta)| (key, meta, Place::File))
                .chain(packed.into_iter().map(|packed| {
                    let meta = BlockMeta {
                        length: packed.head.length,
                        bytes_per_checksum: packed.head.bytes_per_checksum,
                    };
                    (packed.head.key, meta, Place::Packed(packed))
                }));
            for (key, meta, place) in found {
                if index.blocks.contains_key(&key) {
                    tracing::warn!(block = %key, disk = %paths.root.display(), "block found twice; serving the first copy");
                    continue;
                }
                let disk = number;
                index.insert(key, Stored { meta, disk, place });
            }
            disks.push(Arc::new(Disk::new(number, paths, volumes)));
        }
        if disks.iter().all(|disk| disk.is_failed()) {
            return Err(StoreError::io(
                "open the data folders",
                std::io::Error::other("every disk failed"),
            ));
        }
        for disk in &disks {
            let totals = index.totals[usize::from(disk.number)];
            tracing::info!(
                dir = %disk.paths.root.display(), id = %id,
                blocks = totals.blocks, packed = totals.packed, used = totals.used,
                "disk opened"
            );
        }
        let store = Arc::new(Self {
            disks,
            id,
            default_bytes_per_checksum: bytes_per_checksum,
            fsync,
            index: RwLock::new(index),
            failed_disks_tolerated: AtomicUsize::new(usize::MAX),
            disks_lost: tokio::sync::watch::channel(false).0,
            lost: Mutex::new(Vec::new()),
            next_disk: AtomicUsize::new(0),
            pack_max: AtomicU64::new(DEFAULT_PACK_MAX),
            open: Mutex::new(HashMap::new()),
            next_upload: AtomicU64::new(1),
            removals: tokio::sync::broadcast::channel(REMOVALS_BUFFER).0,
            local_socket: RwLock::new(None),
            direct_writes: AtomicBool::new(true),
            disk_writes: Arc::new(tokio::sync::Semaphore::new(DEFAULT_DISK_WRITES)),
            max_disk_writes: AtomicUsize::new(DEFAULT_DISK_WRITES),
        });
        store.publish_gauges();
        Ok(store)
    }

    /// How many failed disks the store serves on past; one more and
    /// [`Self::disks_lost`] turns true (at once, when as many have failed
    /// already).
    pub fn set_failed_disks_tolerated(&self, tolerated: usize) {
        self.failed_disks_tolerated
            .store(tolerated, Ordering::Relaxed);
        self.check_failed_count();
    }

    /// Turns true once more disks have failed than are tolerated: the
    /// datanode should stop.
    pub fn disks_lost(&self) -> tokio::sync::watch::Receiver<bool> {
        self.disks_lost.subscribe()
    }

    fn check_failed_count(&self) {
        let failed = self.disks.iter().filter(|d| d.is_failed()).count();
        let tolerated = self.failed_disks_tolerated.load(Ordering::Relaxed);
        if failed > tolerated {
            tracing::error!(
                failed,
                tolerated,
                "more disks failed than tolerated: the datanode stops"
            );
            self.disks_lost.send_replace(true);
        }
    }

    /// Takes `disk` out of service for `reason`: every block on it leaves
    /// the index, is dropped by short-circuit readers, and waits in
    /// [`Self::take_lost`] for meta to hear of it.
    fn fail_disk(&self, disk: &Disk, reason: String) {
        if !disk.fail(reason.clone()) {
            return;
        }
        let lost: Vec<BlockKey> = {
            let mut index = self.index.write();
            let keys: Vec<BlockKey> = index
                .blocks
                .iter()
                .filter(|(_, stored)| stored.disk == disk.number)
                .map(|(key, _)| *key)
                .collect();
            for key in &keys {
                index.remove(key);
            }
            keys
        };
        tracing::error!(
            disk = %disk.paths.root.display(), %reason, blocks = lost.len(),
            "disk failed: out of service, its blocks reported lost"
        );
        telemetry::disk_failed();
        for key in &lost {
            let _ = self.removals.send(*key);
        }
        let why = format!("disk {} failed: {reason}", disk.paths.root.display());
        self.lost
            .lock()
            .extend(lost.into_iter().map(|key| (key, why.clone())));
        self.check_failed_count();
        self.publish_gauges();
    }

    /// Passes `result`, of an operation on `disk`, back. An error saying
    /// the device is gone or read-only takes the disk out of service at
    /// once; an EIO only when a probe of the disk then fails too: one
    /// unreadable sector costs its block file (the read fails, the client
    /// reads the group's others and reports it, meta rebuilds it), not the
    /// whole disk.
    async fn on_disk<T>(
        &self,
        disk: &Arc<Disk>,
        result: Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let Err(e) = &result else {
            return result;
        };
        match disks::failing(e) {
            None => {}
            Some(disks::Failing::Gone) => self.fail_disk(disk, e.to_string()),
            Some(disks::Failing::Io) => {
                let probing = disk.clone();
                if let Ok(Err(reason)) = blocking(move || Ok(probing.probe())).await {
                    self.fail_disk(disk, format!("{e}; then {reason}"));
                }
            }
        }
        result
    }

    /// The blocks lost with failed disks since the last call, and why,
    /// for meta.
    pub fn take_lost(&self) -> Vec<(BlockKey, String)> {
        std::mem::take(&mut *self.lost.lock())
    }

    /// Probes every disk in service (its identity readable, a file written
    /// and synced), taking out of service those that fail. Blocking.
    pub fn check_disks(&self) {
        for disk in self.disks.iter().filter(|d| !d.is_failed()) {
            if let Err(reason) = disk.probe() {
                self.fail_disk(disk, reason);
            }
        }
    }

    /// Every disk: its folder, what it holds, its room and its health.
    /// Blocking (one statvfs per disk).
    pub fn disks(&self) -> Vec<DiskStatus> {
        let totals = self.index.read().totals.clone();
        self.disks
            .iter()
            .map(|disk| {
                let held = totals[usize::from(disk.number)];
                DiskStatus {
                    path: disk.paths.root.clone(),
                    blocks: held.blocks,
                    used: held.used,
                    available: disk.available(),
                    failed: disk.failure(),
                }
            })
            .collect()
    }

    /// The disk for a new block: in turn among the disks in service with
    /// the most room, those within [`ROOM_SPREAD`] of the roomiest all
    /// counting as such (so that writes spread over the spindles, while a
    /// disk far fuller than the rest waits for them to catch up). Blocking
    /// at most once a second per disk (statvfs).
    fn choose_disk(&self) -> Result<Arc<Disk>, StoreError> {
        let rooms: Vec<(&Arc<Disk>, u64)> = self
            .disks
            .iter()
            .filter(|d| !d.is_failed())
            .map(|d| (d, d.room()))
            .collect();
        let Some(most) = rooms.iter().map(|(_, room)| *room).max() else {
            return Err(StoreError::io(
                "choose a disk",
                std::io::Error::other("every disk has failed"),
            ));
        };
        let floor = most - (most as f64 * ROOM_SPREAD) as u64;
        let roomy: Vec<&Arc<Disk>> = rooms
            .into_iter()
            .filter(|(_, room)| *room >= floor)
            .map(|(disk, _)| disk)
            .collect();
        let turn = self.next_disk.fetch_add(1, Ordering::Relaxed);
        Ok(roomy[turn % roomy.len()].clone())
    }

    fn disk(&self, number: u16) -> &Arc<Disk> {
        &self.disks[usize::from(number)]
    }

    /// Whether aligned writes go straight to disk (O_DIRECT, the default) or
    /// through the page cache. Applies to uploads started afterwards.
    pub fn set_direct_writes(&self, on: bool) {
        self.direct_writes.store(on, Ordering::Relaxed);
    }

    /// How many disk writes run at once (at least one). Lowering it takes
    /// effect as running writes finish.
    pub fn set_max_disk_writes(&self, max: usize) {
        let max = max.max(1);
        let old = self.max_disk_writes.swap(max, Ordering::Relaxed);
        if max > old {
            self.disk_writes.add_permits(max - old);
        } else {
            let owed = old - max;
            let forgotten = self.disk_writes.forget_permits(owed);
            if forgotten < owed {
                // The rest are held by running writes: taken as they return.
                let disk_writes = self.disk_writes.clone();
                let rest = (owed - forgotten) as u32;
                tokio::spawn(async move {
                    if let Ok(permits) = disk_writes.acquire_many_owned(rest).await {
                        permits.forget();
                    }
                });
            }
        }
    }

    /// Blocks up to `bytes` long are packed into volumes from now on (0:
    /// none); longer ones get files of their own.
    pub fn set_pack_max(&self, bytes: u64) {
        self.pack_max.store(bytes, Ordering::Relaxed);
    }

    /// Whether a block of `length` bytes is packed into a volume.
    fn packs(&self, length: u64) -> bool {
        let max = self.pack_max.load(Ordering::Relaxed);
        max > 0 && length <= max
    }

    /// Sets the size past which a new volume is started.
    pub fn set_volume_max(&self, bytes: u64) {
        for volumes in self.disks.iter().filter_map(|d| d.volumes.as_ref()) {
            volumes.set_volume_max(bytes);
        }
    }

    /// Every volume's bytes, all and live, with the number of its disk.
    pub fn volume_usage(&self) -> Vec<(u16, volumes::VolumeUse)> {
        self.disks
            .iter()
            .filter(|d| !d.is_failed())
            .filter_map(|d| Some((d.number, d.volumes.as_ref()?)))
            .flat_map(|(number, volumes)| volumes.usage().into_iter().map(move |u| (number, u)))
            .collect()
    }

    /// Path of volume `volume` of disk `disk` (for tools and
    /// fault-injection tests).
    pub fn volume_path(&self, disk: u16, volume: u32) -> PathBuf {
        self.disk(disk).paths.volume(volume)
    }

    /// Where committed block `key`'s bytes are: its data file or its
    /// volume, and the offset of its first byte there (for tools and
    /// fault-injection tests).
    pub fn stored_at(&self, key: BlockKey) -> Option<(PathBuf, u64)> {
        let stored = *self.index.read().blocks.get(&key)?;
        let paths = &self.disk(stored.disk).paths;
        match stored.place {
            Place::Packed(p) => Some((paths.volume(p.volume), p.data_offset())),
            Place::File => Some((paths.data(key), 0)),
        }
    }

    /// Whether uploads starting now write aligned data straight to disk.
    pub fn direct_writes(&self) -> bool {
        self.direct_writes.load(Ordering::Relaxed)
    }

    /// This datanode's persistent identity.
    pub fn id(&self) -> &DatanodeId {
        &self.id
    }

    /// The data folder of every disk, in order.
    pub fn data_dirs(&self) -> Vec<PathBuf> {
        self.disks.iter().map(|d| d.paths.root.clone()).collect()
    }

    /// Publishes the committed blocks and bytes as this datanode's gauges.
    fn publish_gauges(&self) {
        let stats = self.stats();
        telemetry::store_gauges(
            &self.id,
            stats.blocks,
            stats.packed,
            stats.used,
            stats.garbage,
        );
    }

    /// Committed block count and bytes.
    pub fn stats(&self) -> StoreStats {
        let index = self.index.read();
        let serving = self.disks.iter().filter(|d| !d.is_failed());
        StoreStats {
            blocks: index.blocks.len() as u64,
            used: index.totals.iter().map(|t| t.used).sum(),
            packed: index.totals.iter().map(|t| t.packed).sum(),
            garbage: serving
                .filter_map(|d| d.volumes.as_ref())
                .map(|v| v.garbage())
                .sum(),
        }
    }

    /// The committed block `key`, if any.
    pub fn block(&self, key: BlockKey) -> Option<BlockMeta> {
        self.index.read().blocks.get(&key).map(|stored| stored.meta)
    }

    /// When committed block `key` was committed (None: not committed).
    /// Blocking for a block with a file of its own: its sidecar's mtime.
    pub fn committed_at(&self, key: BlockKey) -> Option<SystemTime> {
        let stored = *self.index.read().blocks.get(&key)?;
        match stored.place {
            Place::Packed(p) => {
                Some(SystemTime::UNIX_EPOCH + Duration::from_millis(p.head.committed_ms))
            }
            Place::File => fs::metadata(self.disk(stored.disk).paths.sidecar(key))
                .and_then(|m| m.modified())
                .ok(),
        }
    }

    fn stored(&self, key: BlockKey) -> Result<Stored, StoreError> {
        self.index
            .read()
            .blocks
            .get(&key)
            .copied()
            .ok_or(StoreError::NotFound(key))
    }

    /// Opens stored block `key` and reads the CRCs of `count` chunks from
    /// `first`: its file, or its volume and record. A failing disk is taken
    /// out of service.
    async fn open_stored(
        &self,
        key: BlockKey,
        stored: Stored,
        first: u64,
        count: u64,
    ) -> Result<(Arc<File>, u64, Vec<u32>), StoreError> {
        let disk = self.disk(stored.disk).clone();
        let opened = self.open_on(&disk, key, stored, first, count).await;
        self.on_disk(&disk, opened).await
    }

    async fn open_on(
        &self,
        disk: &Disk,
        key: BlockKey,
        stored: Stored,
        first: u64,
        count: u64,
    ) -> Result<(Arc<File>, u64, Vec<u32>), StoreError> {
        match stored.place {
            Place::File => {
                let (data_path, sidecar_path) = (disk.paths.data(key), disk.paths.sidecar(key));
                let meta = stored.meta;
                let (file, crcs) = blocking(move || {
                    open_checked(key, meta, &data_path, &sidecar_path, first, count)
                })
                .await?;
                Ok((Arc::new(file), 0, crcs))
            }
            Place::Packed(packed) => {
                let volumes = disk.volumes()?.clone();
                let (file, crcs) = blocking(move || volumes.open_record(&packed)).await?;
                let crcs = crcs
                    .get(first as usize..(first + count) as usize)
                    .ok_or_else(|| {
                        StoreError::Invalid(format!("block {key}: fewer CRCs than chunks"))
                    })?
                    .to_vec();
                Ok((file, packed.data_offset(), crcs))
            }
        }
    }

    /// Every committed block, sorted.
    pub fn committed_blocks(&self) -> Vec<BlockKey> {
        let mut keys: Vec<_> = self.index.read().blocks.keys().copied().collect();
        keys.sort();
        keys
    }

    /// Every committed block, in the order a pass reading them all should
    /// take: blocks with files of their own by key, then the packed ones
    /// volume by volume, front to back.
    pub fn scrub_order(&self) -> Vec<BlockKey> {
        let index = self.index.read();
        let mut order: Vec<(u16, u32, u64, BlockKey)> = index
            .blocks
            .iter()
            .map(|(key, stored)| match stored.place {
                Place::File => (stored.disk, 0, 0, *key),
                Place::Packed(p) => (stored.disk, p.volume, p.offset, *key),
            })
            .collect();
        order.sort_unstable();
        order.into_iter().map(|(_, _, _, key)| key).collect()
    }

    /// The paths of the disk holding `key` (the first disk's when it is
    /// not committed).
    fn paths_of(&self, key: BlockKey) -> &Paths {
        let disk = self.index.read().blocks.get(&key).map_or(0, |s| s.disk);
        &self.disk(disk).paths
    }

    /// Path of `key`'s committed data file (for tools and fault-injection tests).
    pub fn data_path(&self, key: BlockKey) -> PathBuf {
        self.paths_of(key).data(key)
    }

    /// Path of `key`'s committed checksum sidecar.
    pub fn sidecar_path(&self, key: BlockKey) -> PathBuf {
        self.paths_of(key).sidecar(key)
    }

    /// Receives the key of every committed block deleted from now on, so
    /// that short-circuit clients can be told to drop its descriptor. A
    /// receiver that falls behind gets `Lagged` and must revoke everything.
    pub fn subscribe_removals(&self) -> tokio::sync::broadcast::Receiver<BlockKey> {
        self.removals.subscribe()
    }

    /// Records the Unix socket serving short-circuit reads of this store
    /// (`None`: not served), which the block server advertises to clients.
    pub fn set_local_socket(&self, path: Option<PathBuf>) {
        *self.local_socket.write() = path;
    }

    /// The Unix socket serving short-circuit reads, if any.
    pub fn local_socket(&self) -> Option<PathBuf> {
        self.local_socket.read().clone()
    }

    /// Number of uploads in progress.
    pub fn open_uploads(&self) -> usize {
        self.open.lock().len()
    }

    fn check_committed(&self, key: BlockKey, length: u64) -> Result<(), StoreError> {
        match self.block(key) {
            Some(meta) if meta.length == length => Ok(()),
            Some(meta) => Err(StoreError::Invalid(format!(
                "block {key} is committed at {} bytes, not {length}",
                meta.length
            ))),
            None => Err(StoreError::NotFound(key)),
        }
    }

    /// Opens the chunk-aligned range covering `[offset, offset + length)` of
    /// committed block `key`: the start rounded down and the end rounded up
    /// to chunk boundaries, clamped to the block's end.
    pub async fn open_range(
        &self,
        key: BlockKey,
        offset: u64,
        length: u64,
    ) -> Result<BlockRange, StoreError> {
        let stored = self.stored(key)?;
        let meta = stored.meta;
        let out_of_range = StoreError::OutOfRange {
            key,
            offset,
            length,
            block_length: meta.length,
        };
        match offset.checked_add(length) {
            Some(end) if end <= meta.length => {}
            _ => return Err(out_of_range),
        }
        let bpc = meta.bytes_per_checksum;
        let (start, end) = checksum::aligned_span(offset, length, meta.length, bpc);
        if end - start > u64::from(MAX_PAYLOAD_LEN) {
            return Err(StoreError::Invalid(format!(
                "block {key}: {} bytes asked in one read, the limit is {MAX_PAYLOAD_LEN}",
                end - start
            )));
        }
        let first = start / u64::from(bpc);
        let count = checksum::chunk_count(end - start, bpc);
        let (file, base, crcs) = self.open_stored(key, stored, first, count).await?;
        Ok(BlockRange {
            header: ReadData {
                offset: start,
                length: end - start,
                bytes_per_checksum: bpc,
                crcs,
            },
            file,
            base,
        })
    }

    /// Opens committed block `key` whole: its file and every CRC, checked
    /// like [`BlockStore::open_range`] (for readers that keep it open).
    pub async fn open_whole(&self, key: BlockKey) -> Result<OpenedBlock, StoreError> {
        let stored = self.stored(key)?;
        let meta = stored.meta;
        let count = checksum::chunk_count(meta.length, meta.bytes_per_checksum);
        let (file, base, crcs) = self.open_stored(key, stored, 0, count).await?;
        Ok(OpenedBlock {
            meta,
            file,
            base,
            crcs,
        })
    }

    /// Takes committed block `key` out of the index (its bytes stay).
    fn forget(&self, key: BlockKey) -> Option<Stored> {
        self.index.write().remove(&key)
    }

    /// Removes the bytes of `stored`, a block already forgotten: tombstones
    /// its record, or deletes its files (the sidecar, which marks a block
    /// committed, first). Durable when it returns, so a crash cannot bring
    /// the block back once meta forgets it.
    async fn remove_stored(&self, key: BlockKey, stored: Stored) -> Result<(), StoreError> {
        let disk = self.disk(stored.disk).clone();
        let removed = self.remove_on(&disk, key, stored).await;
        self.on_disk(&disk, removed).await
    }

    async fn remove_on(
        &self,
        disk: &Disk,
        key: BlockKey,
        stored: Stored,
    ) -> Result<(), StoreError> {
        if let Place::Packed(packed) = stored.place {
            return disk.volumes()?.delete(packed).await;
        }
        let paths = &disk.paths;
        let (data, sidecar) = (paths.data(key), paths.sidecar(key));
        let (shard, fsync) = (paths.shard_dir(key), self.fsync);
        blocking(move || {
            remove_if_present(&sidecar)?;
            remove_if_present(&data)?;
            if fsync {
                sync_shard(&shard)?;
            }
            Ok(())
        })
        .await
    }

    /// Deletes block `key`, committed or still uploading. Returns whether
    /// there was anything to delete; absent is not an error.
    pub async fn delete(&self, key: BlockKey) -> Result<bool, StoreError> {
        let mut existed = false;
        let handle = self.open.lock().remove(&key);
        if let Some(handle) = handle {
            let mut block = handle.lock().await;
            if !block.closed {
                existed = true;
                self.discard(key, &handle, &mut block).await;
            }
        }
        if let Some(stored) = self.forget(key) {
            existed = true;
            // No receivers is fine: no short-circuit client is watching.
            let _ = self.removals.send(key);
            self.remove_stored(key, stored).await?;
            self.publish_gauges();
        }
        Ok(existed)
    }
}

#[cfg(test)]
mod tests;
