//! Block files on local disk.
//!
//! A committed block is a plain data file holding only the block's bytes, so
//! that any range can go out with one sendfile call, plus a checksum sidecar
//! (see the `sidecar` module). An upload appends to a temporary file under `tmp/`, its
//! CRCs verified on arrival and kept in memory; the commit writes the sidecar,
//! fsyncs both files, renames them into their shard folder and fsyncs that.
//!
//! Every disk access runs on tokio's blocking pool.

pub(crate) mod direct;
mod paths;
mod recovery;
mod scrub;
pub(crate) mod sidecar;
mod uploads;

pub use scrub::Verified;

use uploads::sync_shard;

use crate::error::StoreError;
use crate::telemetry;
use bytes::Bytes;
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
use std::time::{Duration, Instant};

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
}

/// A chunk-aligned range of a committed block, ready to send: the read reply
/// header (CRCs included) and the open data file the bytes come from. The
/// data file holds only block bytes, so file offset = block offset.
#[derive(Debug)]
pub struct BlockRange {
    /// The reply header: range actually sent and its CRCs.
    pub header: ReadData,
    /// The block's data file, opened before the reply starts (a concurrent
    /// delete cannot pull it away mid-reply).
    pub file: File,
}

/// An upload in progress.
struct OpenBlock {
    /// Distinguishes this upload's temporary files from any other of the same key.
    upload: u64,
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
    touched: Instant,
    /// Committed or discarded: whoever still holds this handle must look again.
    closed: bool,
}

type OpenHandle = Arc<tokio::sync::Mutex<OpenBlock>>;

struct Index {
    blocks: HashMap<BlockKey, BlockMeta>,
    used: u64,
}

/// The block files of one datanode.
pub struct BlockStore {
    paths: Paths,
    id: DatanodeId,
    default_bytes_per_checksum: u32,
    fsync: bool,
    index: RwLock<Index>,
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

/// Default number of disk writes a store runs at once.
pub const DEFAULT_DISK_WRITES: usize = 4;

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
        Self::open_as(dir, bytes_per_checksum, fsync, None).await
    }

    /// The id of the datanode whose data folder `dir` is, if it has been
    /// opened before (blocking: reads one small file).
    pub fn identity_in(dir: impl Into<PathBuf>) -> Result<Option<DatanodeId>, StoreError> {
        recovery::read_identity(&Paths::new(dir.into()))
    }

    /// [`Self::open`] for the datanode `identity` (its credential's): a
    /// fresh folder takes that id, a folder of another datanode is refused.
    pub async fn open_as(
        dir: impl Into<PathBuf>,
        bytes_per_checksum: u32,
        fsync: bool,
        identity: Option<DatanodeId>,
    ) -> Result<Arc<Self>, StoreError> {
        checksum::validate_bytes_per_checksum(bytes_per_checksum)
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        let paths = Paths::new(dir.into());
        let (paths, id, recovered) = blocking(move || {
            recovery::prepare_folders(&paths)?;
            let id = recovery::load_or_create_identity(&paths, identity.as_ref())?;
            let recovered = recovery::load_blocks(&paths)?;
            Ok((paths, id, recovered))
        })
        .await?;
        tracing::info!(
            dir = %paths.root.display(), id = %id,
            blocks = recovered.blocks.len(), used = recovered.used,
            "block store opened"
        );
        let store = Arc::new(Self {
            paths,
            id,
            default_bytes_per_checksum: bytes_per_checksum,
            fsync,
            index: RwLock::new(Index {
                blocks: recovered.blocks,
                used: recovered.used,
            }),
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

    /// Whether uploads starting now write aligned data straight to disk.
    pub fn direct_writes(&self) -> bool {
        self.direct_writes.load(Ordering::Relaxed)
    }

    /// This datanode's persistent identity.
    pub fn id(&self) -> &DatanodeId {
        &self.id
    }

    /// The data folder.
    pub fn data_dir(&self) -> &Path {
        &self.paths.root
    }

    /// Publishes the committed blocks and bytes as this datanode's gauges.
    fn publish_gauges(&self) {
        let stats = self.stats();
        telemetry::store_gauges(&self.id, stats.blocks, stats.used);
    }

    /// Committed block count and bytes.
    pub fn stats(&self) -> StoreStats {
        let index = self.index.read();
        StoreStats {
            blocks: index.blocks.len() as u64,
            used: index.used,
        }
    }

    /// The committed block `key`, if any.
    pub fn block(&self, key: BlockKey) -> Option<BlockMeta> {
        self.index.read().blocks.get(&key).copied()
    }

    /// Every committed block, sorted.
    pub fn committed_blocks(&self) -> Vec<BlockKey> {
        let mut keys: Vec<_> = self.index.read().blocks.keys().copied().collect();
        keys.sort();
        keys
    }

    /// Path of `key`'s committed data file (for tools and fault-injection tests).
    pub fn data_path(&self, key: BlockKey) -> PathBuf {
        self.paths.data(key)
    }

    /// Path of `key`'s committed checksum sidecar.
    pub fn sidecar_path(&self, key: BlockKey) -> PathBuf {
        self.paths.sidecar(key)
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
        let meta = self.block(key).ok_or(StoreError::NotFound(key))?;
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
        let (data_path, sidecar_path) = (self.paths.data(key), self.paths.sidecar(key));
        blocking(move || {
            let first = start / u64::from(bpc);
            let count = checksum::chunk_count(end - start, bpc);
            let (file, crcs) = open_checked(key, meta, &data_path, &sidecar_path, first, count)?;
            Ok(BlockRange {
                header: ReadData {
                    offset: start,
                    length: end - start,
                    bytes_per_checksum: bpc,
                    crcs,
                },
                file,
            })
        })
        .await
    }

    /// Opens committed block `key` whole: its data file and every CRC,
    /// checked like [`BlockStore::open_range`] (for short-circuit readers).
    pub async fn open_whole(
        &self,
        key: BlockKey,
    ) -> Result<(BlockMeta, File, Vec<u32>), StoreError> {
        let meta = self.block(key).ok_or(StoreError::NotFound(key))?;
        let (data_path, sidecar_path) = (self.paths.data(key), self.paths.sidecar(key));
        let count = checksum::chunk_count(meta.length, meta.bytes_per_checksum);
        let (file, crcs) =
            blocking(move || open_checked(key, meta, &data_path, &sidecar_path, 0, count)).await?;
        Ok((meta, file, crcs))
    }

    /// Takes committed block `key` out of the index (its files stay).
    fn forget(&self, key: BlockKey) -> Option<BlockMeta> {
        let mut index = self.index.write();
        let removed = index.blocks.remove(&key);
        if let Some(meta) = removed {
            index.used -= meta.length;
        }
        removed
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
        if self.forget(key).is_some() {
            existed = true;
            // No receivers is fine: no short-circuit client is watching.
            let _ = self.removals.send(key);
            let (data, sidecar) = (self.paths.data(key), self.paths.sidecar(key));
            let (shard, fsync) = (self.paths.shard_dir(key), self.fsync);
            // The sidecar marks a block as committed: it goes first. The
            // folder is synced before the delete is reported done (and meta
            // forgets it), so a crash cannot bring the block back.
            blocking(move || {
                remove_if_present(&sidecar)?;
                remove_if_present(&data)?;
                if fsync {
                    sync_shard(&shard)?;
                }
                Ok(())
            })
            .await?;
            self.publish_gauges();
        }
        Ok(existed)
    }
}

#[cfg(test)]
mod tests;
