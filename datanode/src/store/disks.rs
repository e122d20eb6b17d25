//! The disks of one datanode.
//!
//! Each disk is a folder of its own (normally a mount point): its shard
//! folders of block files, its volumes with their writer thread, its
//! uploads and quarantine, and a copy of the datanode's identity. New
//! cells go in turn to the healthy disks with the most room. A disk that fails (an
//! error that means the device is gone or read-only, or an EIO after which a
//! probe cannot write and sync a file on it) is taken out of service for good:
//! its cells leave the index at once and are handed to meta as lost, so
//! that meta rebuilds them elsewhere, while the datanode goes on serving
//! its other disks. Past the number of failed disks it tolerates it stops.

use super::paths::Paths;
use super::volumes::Volumes;
use crate::error::StoreError;
use parking_lot::Mutex;
use proto::durable::available_space;
use std::fs;
use std::io::{self, ErrorKind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a free-space reading is trusted before the next statvfs.
const FREE_SPACE_TTL: Duration = Duration::from_secs(1);

/// Name of the file the health probe writes and syncs under `tmp/`.
const PROBE_FILE: &str = "disk-probe";

/// One disk of the store.
pub(crate) struct Disk {
    /// Its position among the datanode's disks (index entries name it).
    pub number: u16,
    pub paths: Paths,
    /// Its volumes; None when it failed before they could be opened.
    pub volumes: Option<Arc<Volumes>>,
    /// Why it was taken out of service, once it was.
    failure: Mutex<Option<String>>,
    /// Free bytes at the last statvfs, and when that was.
    free: Mutex<(u64, Option<Instant>)>,
    /// Bytes accepted for it since that statvfs (an estimate of what the
    /// reading no longer shows, so that busy disks stop looking emptiest).
    accepted: AtomicU64,
}

/// What one disk reports: to meta, `tessera admin status` and the gauges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiskStatus {
    /// Its folder.
    pub path: PathBuf,
    /// Committed blocks on it.
    pub blocks: u64,
    /// Bytes of committed block data on it.
    pub used: u64,
    /// Bytes its filesystem can still take (0 once failed).
    pub available: u64,
    /// Why it is out of service, if it is.
    pub failed: Option<String>,
}

impl Disk {
    /// A disk in service over `paths`.
    pub fn new(number: u16, paths: Paths, volumes: Volumes) -> Self {
        Self::with(number, paths, Some(Arc::new(volumes)), None)
    }

    /// A disk that failed as it was opened.
    pub fn failed(number: u16, paths: Paths, reason: String) -> Self {
        Self::with(number, paths, None, Some(reason))
    }

    fn with(
        number: u16,
        paths: Paths,
        volumes: Option<Arc<Volumes>>,
        failure: Option<String>,
    ) -> Self {
        Self {
            number,
            paths,
            volumes,
            failure: Mutex::new(failure),
            free: Mutex::new((0, None)),
            accepted: AtomicU64::new(0),
        }
    }

    /// Why the disk is out of service; None while it serves.
    pub fn failure(&self) -> Option<String> {
        self.failure.lock().clone()
    }

    /// Whether it is out of service.
    pub fn is_failed(&self) -> bool {
        self.failure.lock().is_some()
    }

    /// Takes the disk out of service; false when it already was.
    pub fn fail(&self, reason: String) -> bool {
        let mut failure = self.failure.lock();
        if failure.is_some() {
            return false;
        }
        *failure = Some(reason);
        true
    }

    /// Its volumes, unless it failed as it was opened.
    pub fn volumes(&self) -> Result<&Arc<Volumes>, StoreError> {
        self.volumes.as_ref().ok_or_else(|| self.out_of_service())
    }

    /// The error of an operation refused because the disk failed.
    pub fn out_of_service(&self) -> StoreError {
        let reason = self.failure().unwrap_or_default();
        StoreError::io(
            format!("disk {}", self.paths.root.display()),
            io::Error::other(format!("out of service: {reason}")),
        )
    }

    /// Bytes its filesystem can still take, less what was accepted since
    /// the last reading (statvfs at most once a [`FREE_SPACE_TTL`]).
    /// Blocking when the reading is stale.
    pub fn room(&self) -> u64 {
        let mut free = self.free.lock();
        if free.1.is_none_or(|at| at.elapsed() >= FREE_SPACE_TTL) {
            free.0 = available_space(&self.paths.root).unwrap_or(0);
            free.1 = Some(Instant::now());
            self.accepted.store(0, Ordering::Relaxed);
        }
        free.0.saturating_sub(self.accepted.load(Ordering::Relaxed))
    }

    /// Notes `bytes` accepted for the disk since the last reading.
    pub fn accept(&self, bytes: u64) {
        self.accepted.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Bytes its filesystem can still take, measured now (0 when it
    /// cannot be measured or has failed). Blocking.
    pub fn available(&self) -> u64 {
        if self.is_failed() {
            return 0;
        }
        available_space(&self.paths.root).unwrap_or(0)
    }

    /// Checks that the disk still holds the datanode's identity and can
    /// write and sync a file. Blocking. Err: why it cannot.
    pub fn probe(&self) -> Result<(), String> {
        let paths = &self.paths;
        fs::metadata(&paths.identity)
            .map_err(|e| format!("its identity file cannot be read: {e}"))?;
        let probe = paths.tmp.join(PROBE_FILE);
        let written = fs::write(&probe, b"probe")
            .and_then(|()| fs::File::open(&probe)?.sync_all())
            .and_then(|()| fs::remove_file(&probe));
        match written {
            // A full disk is not a failed one.
            Err(e) if e.raw_os_error() != Some(rustix::io::Errno::NOSPC.raw_os_error()) => {
                Err(format!("a probe file cannot be written and synced: {e}"))
            }
            _ => Ok(()),
        }
    }
}

/// What an error of an operation on a disk says of the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failing {
    /// The device is gone or read-only: the disk leaves service at once.
    Gone,
    /// An I/O error (EIO): one bad sector, or a dying disk; a probe tells.
    Io,
}

/// Whether `e` says the device under a disk is failing, not that the
/// request was wrong or one file was missing, and how.
pub(crate) fn failing(e: &StoreError) -> Option<Failing> {
    let StoreError::Io { source, .. } = e else {
        return None;
    };
    if source.kind() == ErrorKind::ReadOnlyFilesystem {
        return Some(Failing::Gone);
    }
    use rustix::io::Errno;
    let gone = [Errno::ROFS, Errno::NODEV, Errno::NXIO, Errno::STALE];
    let code = source.raw_os_error()?;
    if code == Errno::IO.raw_os_error() {
        Some(Failing::Io)
    } else if gone.iter().any(|g| g.raw_os_error() == code) {
        Some(Failing::Gone)
    } else {
        None
    }
}

/// Whether `e` says the device under a disk is failing in any way.
pub(crate) fn means_disk_failure(e: &StoreError) -> bool {
    failing(e).is_some()
}

/// Default number of failed disks a datanode with `disks` disks serves on
/// past: half of them, rounded down (none for one disk). A datanode that
/// lost more is more likely a failing host than a few worn disks, and is
/// better stopped and repaired whole.
pub fn default_failed_disks_tolerated(disks: usize) -> usize {
    disks / 2
}
