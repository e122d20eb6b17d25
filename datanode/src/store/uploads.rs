//! The write path of the block store: uploads held in memory while they fit
//! the pack limit, into temporary files past it, their CRCs checked on
//! arrival; the commit (a volume record, or sidecar, fsyncs and a rename
//! into the shard folder); and the clean-up of uploads that were abandoned.

use super::*;

impl BlockStore {
    /// Appends `data` at `offset` of the upload of `key`, after checking each
    /// chunk against `crcs`. The first write (offset 0) starts the upload;
    /// each next one must start where the last ended, on a chunk boundary.
    /// A checksum mismatch or a disk error discards the whole upload.
    pub async fn write_chunks(
        &self,
        key: BlockKey,
        offset: u64,
        bytes_per_checksum: u32,
        crcs: Vec<u32>,
        data: Bytes,
    ) -> Result<(), StoreError> {
        checksum::validate_bytes_per_checksum(bytes_per_checksum)
            .map_err(|e| StoreError::Invalid(format!("block {key}: {e}")))?;
        if self.block(key).is_some() {
            return Err(StoreError::Invalid(format!(
                "block {key} is already committed"
            )));
        }
        let handle = {
            let mut open = self.open.lock();
            match open.get(&key) {
                Some(handle) => handle.clone(),
                None if offset != 0 => {
                    return Err(StoreError::BadOffset {
                        key,
                        expected: 0,
                        got: offset,
                    })
                }
                None => {
                    let handle = self.new_upload(bytes_per_checksum);
                    open.insert(key, handle.clone());
                    handle
                }
            }
        };
        let mut block = handle.lock().await;
        if block.closed {
            return Err(StoreError::NotFound(key));
        }
        if block.bytes_per_checksum != bytes_per_checksum {
            return Err(StoreError::Invalid(format!(
                "block {key} is written with {} bytes per checksum, not {bytes_per_checksum}",
                block.bytes_per_checksum
            )));
        }
        if offset != block.len || !block.len.is_multiple_of(u64::from(bytes_per_checksum)) {
            return Err(StoreError::BadOffset {
                key,
                expected: block.len,
                got: offset,
            });
        }
        let len = data.len() as u64;
        if block.file.is_none() && self.packs(block.len + len) {
            return self
                .hold(key, &handle, &mut block, offset, crcs, data)
                .await;
        }
        let file = match &block.file {
            Some(file) => file.clone(),
            None => match self.spill(key, &mut block).await {
                Ok(file) => file,
                Err(e) => {
                    self.discard(key, &handle, &mut block).await;
                    return Err(e);
                }
            },
        };
        if let Err(e) = self.written_so_far(key, &mut block).await {
            self.discard(key, &handle, &mut block).await;
            return Err(e);
        }
        let direct = block
            .direct
            .clone()
            .filter(|_| direct::is_aligned(offset, data.len()));
        // Never closed, so acquiring cannot fail.
        let turn = self.disk_writes.clone().acquire_owned().await.ok();
        // One blocking task verifies, answers, then writes: the caller is
        // acknowledged as soon as the CRCs match, the disk write goes on.
        let (verified_tx, verified) = tokio::sync::oneshot::channel();
        let writing = tokio::task::spawn_blocking(move || {
            let _turn = turn;
            let checked = checksum::verify(&data, offset, bytes_per_checksum, &crcs);
            let failed = checked.is_err();
            let _ = verified_tx.send(checked.map(|()| crcs));
            if failed {
                return Ok(());
            }
            match direct {
                Some(direct) => direct::write_at(&direct, &data, offset),
                None => file.write_all_at(&data, offset),
            }
            .map_err(|e| StoreError::io(format!("write block {key}"), e))
        });
        let checked = match verified.await {
            Ok(checked) => checked.map_err(|e| refused_piece(key, e)),
            Err(_) => Err(StoreError::io(
                "disk task",
                std::io::Error::other("checksum task ended early"),
            )),
        };
        match checked {
            Ok(crcs) => {
                block.writing = Some(writing);
                accept_piece(&mut block, len, &crcs);
                Ok(())
            }
            Err(e) => {
                self.discard(key, &handle, &mut block).await;
                Err(e)
            }
        }
    }

    /// Keeps a piece of an upload that still fits the pack limit in memory,
    /// once its CRCs are checked.
    async fn hold(
        &self,
        key: BlockKey,
        handle: &OpenHandle,
        block: &mut OpenBlock,
        offset: u64,
        crcs: Vec<u32>,
        data: Bytes,
    ) -> Result<(), StoreError> {
        match checksum::verify(&data, offset, block.bytes_per_checksum, &crcs) {
            Ok(()) => {
                accept_piece(block, data.len() as u64, &crcs);
                block.pieces.push(data);
                Ok(())
            }
            Err(e) => {
                let e = refused_piece(key, e);
                self.discard(key, handle, block).await;
                Err(e)
            }
        }
    }

    /// Gives an upload held in memory its temporary file, with what it
    /// held written to it: the upload outgrew the pack limit.
    async fn spill(&self, key: BlockKey, block: &mut OpenBlock) -> Result<Arc<File>, StoreError> {
        let disk = self.choose_disk()?;
        let created = self.create_tmp_file(&disk, key, block.upload).await;
        let (file, direct) = self.on_disk(&disk, created).await?;
        block.disk = Some(disk.clone());
        let file = Arc::new(file);
        let pieces = std::mem::take(&mut block.pieces);
        if !pieces.is_empty() {
            let target = file.clone();
            let written = blocking(move || {
                let mut at = 0;
                for piece in pieces {
                    target
                        .write_all_at(&piece, at)
                        .map_err(|e| StoreError::io(format!("write block {key}"), e))?;
                    at += piece.len() as u64;
                }
                Ok(())
            })
            .await;
            self.on_disk(&disk, written).await?;
        }
        block.file = Some(file.clone());
        block.direct = direct.map(Arc::new);
        Ok(file)
    }

    /// Waits for the upload's last disk write; its failure fails the
    /// upload (and a failing disk is taken out of service).
    async fn written_so_far(&self, key: BlockKey, block: &mut OpenBlock) -> Result<(), StoreError> {
        let Some(writing) = block.writing.take() else {
            return Ok(());
        };
        let written = writing.await.map_err(|e| {
            StoreError::io(
                format!("write block {key}"),
                std::io::Error::other(e.to_string()),
            )
        });
        let written = written.and_then(|w| w);
        match block.disk.clone() {
            Some(disk) => self.on_disk(&disk, written).await,
            None => written,
        }
    }

    /// Makes the upload of `key` durable and visible at exactly `length`
    /// bytes. Committing an already committed block at the same length
    /// succeeds (a retried commit); committing a never-written block at
    /// length 0 creates an empty block.
    pub async fn commit(&self, key: BlockKey, length: u64) -> Result<(), StoreError> {
        let existing = self.open.lock().get(&key).cloned();
        let handle = match existing {
            Some(handle) => handle,
            None => {
                if self.block(key).is_some() || length != 0 {
                    return self.check_committed(key, length);
                }
                let mut open = self.open.lock();
                let fresh = self.new_upload(self.default_bytes_per_checksum);
                open.entry(key).or_insert(fresh).clone()
            }
        };
        let mut block = handle.lock().await;
        if block.closed {
            drop(block);
            return self.check_committed(key, length);
        }
        if block.len != length {
            return Err(StoreError::Invalid(format!(
                "block {key}: commit at {length} bytes, but {} were written",
                block.len
            )));
        }
        if let Err(e) = self.written_so_far(key, &mut block).await {
            tracing::error!(block = %key, error = %e, "a write failed on disk; upload discarded");
            self.discard(key, &handle, &mut block).await;
            return Err(e);
        }
        if block.file.is_none() && self.packs(length) {
            return self.commit_packed(key, &handle, &mut block).await;
        }
        let file = match &block.file {
            Some(file) => file.clone(),
            // Held in memory, but the pack limit was lowered since.
            None => match self.spill(key, &mut block).await {
                Ok(file) => file,
                Err(e) => {
                    self.discard(key, &handle, &mut block).await;
                    return Err(e);
                }
            },
        };
        let header = SidecarHeader {
            bytes_per_checksum: block.bytes_per_checksum,
            length,
        };
        let sidecar = header.encode_with(&block.crcs);
        let Some(disk) = block.disk.clone() else {
            unreachable!("an upload with a file has its disk");
        };
        let (paths, upload, fsync) = (disk.paths.clone(), block.upload, self.fsync);
        let committed =
            blocking(move || commit_files(&paths, key, upload, &file, &sidecar, fsync)).await;
        if let Err(e) = self.on_disk(&disk, committed).await {
            tracing::error!(block = %key, error = %e, "commit failed; upload discarded");
            self.discard(key, &handle, &mut block).await;
            return Err(e);
        }
        let meta = BlockMeta {
            length,
            bytes_per_checksum: header.bytes_per_checksum,
        };
        self.committed(key, &handle, &mut block, meta, &disk, Place::File);
        Ok(())
    }

    /// Commits an upload held in memory: appends it to a volume of the
    /// disk with the most room; when that disk fails on the way, to the
    /// next one.
    async fn commit_packed(
        &self,
        key: BlockKey,
        handle: &OpenHandle,
        block: &mut OpenBlock,
    ) -> Result<(), StoreError> {
        let meta = BlockMeta {
            length: block.len,
            bytes_per_checksum: block.bytes_per_checksum,
        };
        let crcs = std::mem::take(&mut block.crcs);
        let pieces = std::mem::take(&mut block.pieces);
        let appended = loop {
            let disk = match self.choose_disk() {
                Ok(disk) => disk,
                Err(e) => break Err(e),
            };
            let cell = NewCell {
                key,
                bytes_per_checksum: meta.bytes_per_checksum,
                length: meta.length,
                crcs: crcs.clone(),
                pieces: pieces.clone(),
            };
            let appended = match disk.volumes() {
                Ok(volumes) => volumes.append(cell).await,
                Err(e) => Err(e),
            };
            match self.on_disk(&disk, appended).await {
                // The disk left service: the next choice is another one.
                Err(e) if disk.is_failed() => {
                    tracing::warn!(block = %key, error = %e, "append failed on a failing disk; trying another");
                }
                appended => break appended.map(|packed| (disk, packed)),
            }
        };
        match appended {
            Ok((disk, packed)) => {
                self.committed(key, handle, block, meta, &disk, Place::Packed(packed));
                Ok(())
            }
            Err(e) => {
                tracing::error!(block = %key, error = %e, "commit failed; upload discarded");
                self.discard(key, handle, block).await;
                Err(e)
            }
        }
    }

    /// Enters a durable upload in the index and closes it.
    fn committed(
        &self,
        key: BlockKey,
        handle: &OpenHandle,
        block: &mut OpenBlock,
        meta: BlockMeta,
        disk: &Disk,
        place: Place,
    ) {
        disk.accept(meta.length);
        let stored = Stored {
            meta,
            disk: disk.number,
            place,
        };
        self.index.write().insert(key, stored);
        block.closed = true;
        self.forget_upload(key, handle);
        self.publish_gauges();
    }

    /// Removes files under `tmp/` older than `max_age` (by mtime) whose
    /// block has no upload in progress: leftovers of an upload whose discard
    /// failed. Uploads in progress are `discard_idle_uploads`' business.
    /// Returns how many files went.
    pub async fn remove_stale_tmp_files(&self, max_age: Duration) -> usize {
        let busy: std::collections::HashSet<BlockKey> = self.open.lock().keys().copied().collect();
        let tmps: Vec<PathBuf> = self
            .disks
            .iter()
            .filter(|d| !d.is_failed())
            .map(|d| d.paths.tmp.clone())
            .collect();
        let removed = blocking(move || {
            let mut removed = 0;
            for tmp in tmps {
                removed += remove_stale_in(&tmp, &busy, max_age)?;
            }
            Ok(removed)
        })
        .await;
        match removed {
            Ok(0) => 0,
            Ok(n) => {
                tracing::info!(files = n, "removed stale temporary block files");
                n
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not sweep temporary block files");
                0
            }
        }
    }

    /// Discards uploads untouched for `max_idle` (a writer that died); returns how many.
    pub async fn discard_idle_uploads(&self, max_idle: Duration) -> usize {
        let handles: Vec<_> = self
            .open
            .lock()
            .iter()
            .map(|(key, handle)| (*key, handle.clone()))
            .collect();
        let mut discarded = 0;
        for (key, handle) in handles {
            // A locked upload is busy, so not idle.
            let Ok(mut block) = handle.try_lock() else {
                continue;
            };
            if !block.closed && block.touched.elapsed() >= max_idle {
                tracing::info!(block = %key, "discarding an abandoned upload");
                self.discard(key, &handle, &mut block).await;
                discarded += 1;
            }
        }
        discarded
    }

    fn new_upload(&self, bytes_per_checksum: u32) -> OpenHandle {
        Arc::new(tokio::sync::Mutex::new(OpenBlock {
            upload: self.next_upload.fetch_add(1, Ordering::Relaxed),
            disk: None,
            file: None,
            direct: None,
            writing: None,
            len: 0,
            bytes_per_checksum,
            crcs: Vec::new(),
            pieces: Vec::new(),
            touched: Instant::now(),
            closed: false,
        }))
    }

    /// Creates an upload's temporary data file; with direct writes on, also
    /// a second, O_DIRECT descriptor of it (None where the file system has
    /// no O_DIRECT, which turns direct writes off for good).
    async fn create_tmp_file(
        &self,
        disk: &Disk,
        key: BlockKey,
        upload: u64,
    ) -> Result<(File, Option<File>), StoreError> {
        let path = disk.paths.tmp_data(key, upload);
        let want_direct = self.direct_writes();
        let (file, direct) = blocking(move || {
            let file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .map_err(|e| StoreError::io(format!("create {}", path.display()), e))?;
            let direct = match want_direct {
                true => direct::open(&path).map_err(|e| {
                    StoreError::io(format!("open {} (O_DIRECT)", path.display()), e)
                })?,
                false => None,
            };
            Ok((file, direct))
        })
        .await?;
        if want_direct && direct.is_none() && self.direct_writes.swap(false, Ordering::Relaxed) {
            tracing::warn!(dir = %disk.paths.root.display(), "the file system refuses O_DIRECT; block data is written through the page cache");
        }
        Ok((file, direct))
    }

    /// Closes an upload, removes its temporary files and forgets it.
    pub(super) async fn discard(&self, key: BlockKey, handle: &OpenHandle, block: &mut OpenBlock) {
        // A write still on its way to the file finishes before the file goes.
        let _ = self.written_so_far(key, block).await;
        block.closed = true;
        block.file = None;
        block.direct = None;
        block.pieces = Vec::new();
        self.forget_upload(key, handle);
        let Some(disk) = block.disk.take() else {
            return;
        };
        let (data, sidecar) = (
            disk.paths.tmp_data(key, block.upload),
            disk.paths.tmp_sidecar(key, block.upload),
        );
        let removed = blocking(move || {
            remove_if_present(&data)?;
            remove_if_present(&sidecar)
        })
        .await;
        if let Err(e) = removed {
            tracing::warn!(block = %key, error = %e, "could not remove a discarded upload's files");
        }
    }

    /// Removes `handle` from the open uploads, unless another upload took its place.
    fn forget_upload(&self, key: BlockKey, handle: &OpenHandle) {
        let mut open = self.open.lock();
        if open.get(&key).is_some_and(|h| Arc::ptr_eq(h, handle)) {
            open.remove(&key);
        }
    }
}

/// Removes the files in `tmp` older than `max_age` whose block is not in
/// `busy`; answers how many went. Blocking.
fn remove_stale_in(
    tmp: &Path,
    busy: &std::collections::HashSet<BlockKey>,
    max_age: Duration,
) -> Result<usize, StoreError> {
    let entries =
        fs::read_dir(tmp).map_err(|e| StoreError::io(format!("list {}", tmp.display()), e))?;
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        // `<key>.<upload>.data|crc`: the key is what precedes the first dot.
        let stem = name.split('.').next().unwrap_or_default();
        let Some((key, _)) = paths::parse_block_file(&format!("{stem}{}", paths::DATA_SUFFIX))
        else {
            continue;
        };
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|at| at.elapsed().ok())
            .is_some_and(|age| age >= max_age);
        if old && !busy.contains(&key) {
            remove_if_present(&entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Records a piece of `len` bytes whose CRCs matched: the upload grows.
fn accept_piece(block: &mut OpenBlock, len: u64, crcs: &[u32]) {
    block.len += len;
    block.crcs.extend_from_slice(crcs);
    block.touched = Instant::now();
    telemetry::bytes_written(len);
}

/// Why a piece of block `key` was refused on arrival (a mismatch is
/// counted and logged: the upload is discarded for it).
fn refused_piece(key: BlockKey, e: ChecksumError) -> StoreError {
    match e {
        ChecksumError::Mismatch { offset, .. } => {
            telemetry::chunk_rejected();
            tracing::warn!(block = %key, offset, "chunk failed its checksum on arrival; upload discarded");
            StoreError::ChecksumMismatch { key, offset }
        }
        other => StoreError::Invalid(format!("block {key}: {other}")),
    }
}

/// Fsyncs a shard folder, making the removal of block files in it durable.
pub(super) fn sync_shard(shard: &Path) -> Result<(), StoreError> {
    recovery::sync_dir(shard)?;
    #[cfg(test)]
    tests::SYNCED_SHARDS.lock().push(shard.to_path_buf());
    Ok(())
}

/// Durably moves an upload into place: fsync the data, write and fsync the
/// sidecar, rename the data then the sidecar (whose presence marks the block
/// committed), fsync the shard folder.
fn commit_files(
    paths: &Paths,
    key: BlockKey,
    upload: u64,
    file: &File,
    sidecar: &[u8],
    fsync: bool,
) -> Result<(), StoreError> {
    let tmp_data = paths.tmp_data(key, upload);
    let tmp_sidecar = paths.tmp_sidecar(key, upload);
    if fsync {
        file.sync_all()
            .map_err(|e| StoreError::io(format!("fsync {}", tmp_data.display()), e))?;
    }
    let write_sidecar = || -> std::io::Result<()> {
        let f = File::create(&tmp_sidecar)?;
        f.write_all_at(sidecar, 0)?;
        if fsync {
            f.sync_all()?;
        }
        Ok(())
    };
    write_sidecar().map_err(|e| StoreError::io(format!("write {}", tmp_sidecar.display()), e))?;
    let shard = paths.shard_dir(key);
    if !shard.is_dir() {
        recovery::create_if_missing(&shard)?;
        if fsync {
            recovery::sync_dir(&paths.blocks)?;
        }
    }
    let (data_path, sidecar_path) = (paths.data(key), paths.sidecar(key));
    fs::rename(&tmp_data, &data_path)
        .map_err(|e| StoreError::io(format!("rename to {}", data_path.display()), e))?;
    fs::rename(&tmp_sidecar, &sidecar_path)
        .map_err(|e| StoreError::io(format!("rename to {}", sidecar_path.display()), e))?;
    if fsync {
        recovery::sync_dir(&shard)?;
    }
    Ok(())
}
