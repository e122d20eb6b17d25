//! Checking committed block files against their checksums, and taking a
//! damaged one out of service: what the scrubber (`crate::scrub`) runs on
//! every block file, at its pace.

use super::disks::Disk;
use super::{blocking, recovery, BlockStore, OpenedBlock, Place};
use crate::error::StoreError;
use block_client::Pacer;
use proto::{checksum, BlockKey};
use std::os::unix::fs::FileExt;

/// Bytes checked per step (a whole number of chunks at any chunk size).
const PIECE: u64 = 1024 * 1024;

/// How a committed block file held up.
#[derive(Debug, PartialEq, Eq)]
pub enum Verified {
    /// Every chunk matches its checksum.
    Whole,
    /// Deleted meanwhile: nothing to check.
    Gone,
    /// Damaged: why.
    Corrupt(String),
}

impl BlockStore {
    /// Reads committed block `key` whole, `pacer` spacing the pieces, and
    /// checks every chunk against its sidecar (and both files' lengths).
    /// Answers how many bytes it read too.
    pub async fn verify_block(
        &self,
        key: BlockKey,
        pacer: &Pacer,
    ) -> Result<(Verified, u64), StoreError> {
        let OpenedBlock {
            meta,
            file,
            base,
            crcs,
        } = match self.open_whole(key).await {
            Ok(opened) => opened,
            Err(StoreError::NotFound(_)) => return Ok((Verified::Gone, 0)),
            Err(e @ StoreError::Corrupt { .. }) => {
                return Ok((Verified::Corrupt(e.to_string()), 0))
            }
            Err(e) => return Err(e),
        };
        let bpc = meta.bytes_per_checksum;
        let piece = checksum::align_down(PIECE, bpc).max(u64::from(bpc));
        let crcs = std::sync::Arc::new(crcs);
        let mut offset = 0;
        while offset < meta.length {
            let len = piece.min(meta.length - offset);
            pacer.take(len).await;
            let (file, crcs) = (file.clone(), crcs.clone());
            let checked = blocking(move || {
                let mut data = vec![0u8; len as usize];
                file.read_exact_at(&mut data, base + offset)
                    .map_err(|e| StoreError::io(format!("reading block {key}"), e))?;
                let first = (offset / u64::from(bpc)) as usize;
                let count = checksum::chunk_count(len, bpc) as usize;
                let Some(expected) = crcs.get(first..first + count) else {
                    return Ok(Some("fewer checksums than chunks".to_string()));
                };
                Ok(checksum::verify(&data, offset, bpc, expected)
                    .err()
                    .map(|e| e.to_string()))
            })
            .await;
            match checked {
                Ok(None) => {}
                Ok(Some(reason)) => return Ok((Verified::Corrupt(reason), offset + len)),
                // Shorter than the sidecar says (truncated under us), or a
                // sector the disk cannot read: damage either way, unless
                // the whole disk is failing (then it leaves service whole).
                Err(StoreError::Io { source, .. }) => {
                    if let Some(disk) = self.disk_of(key) {
                        if self.probe_failed(disk).await {
                            return Ok((Verified::Gone, offset));
                        }
                    }
                    return Ok((
                        Verified::Corrupt(format!("reading it failed: {source}")),
                        offset,
                    ));
                }
                Err(e) => return Err(e),
            }
            offset += len;
        }
        Ok((Verified::Whole, meta.length))
    }

    /// The block files in `quarantine/` (their data files): taken out of
    /// service at start or by the scrubber, reported again after a restart
    /// in case meta never heard of them.
    pub fn quarantined_blocks(&self) -> Vec<BlockKey> {
        let serving = self.disks.iter().filter(|d| !d.is_failed());
        let mut keys: Vec<BlockKey> = serving
            .filter_map(|disk| std::fs::read_dir(&disk.paths.quarantine).ok())
            .flat_map(|entries| entries.flatten())
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                match super::paths::parse_block_file(&name)? {
                    (key, super::paths::BlockFile::Data) => Some(key),
                    _ => None,
                }
            })
            .collect();
        keys.sort();
        keys
    }

    /// The disk holding committed block `key`.
    fn disk_of(&self, key: BlockKey) -> Option<std::sync::Arc<Disk>> {
        let disk = self.index.read().blocks.get(&key)?.disk;
        Some(self.disk(disk).clone())
    }

    /// Probes `disk` after a read on it failed, taking it out of service
    /// when the probe fails too; answers whether it did.
    async fn probe_failed(&self, disk: std::sync::Arc<Disk>) -> bool {
        let probing = disk.clone();
        match blocking(move || Ok(probing.probe())).await {
            Ok(Err(reason)) => {
                self.fail_disk(&disk, reason);
                true
            }
            _ => false,
        }
    }

    /// Takes committed block `key` out of service: forgotten by the index,
    /// dropped by short-circuit readers, its files moved to `quarantine/`
    /// for a person to look at (a packed block's bytes copied there, its
    /// record tombstoned). Answers whether it was committed.
    pub async fn quarantine_block(&self, key: BlockKey, reason: &str) -> Result<bool, StoreError> {
        let Some(stored) = self.forget(key) else {
            return Ok(false);
        };
        let _ = self.removals.send(key);
        let disk = self.disk(stored.disk).clone();
        let paths = disk.paths.clone();
        if let Place::Packed(packed) = stored.place {
            let volume = paths.volume(packed.volume);
            let target = paths.quarantined(&paths.data(key));
            let quarantine = paths.quarantine.clone();
            let reason = reason.to_string();
            blocking(move || {
                let copied = std::fs::create_dir_all(&quarantine).and_then(|()| {
                    let mut data = vec![0u8; packed.head.length as usize];
                    std::fs::File::open(&volume)?.read_exact_at(&mut data, packed.data_offset())?;
                    std::fs::write(&target, data)
                });
                match copied {
                    Ok(()) => tracing::error!(block = %key, to = %target.display(), reason, "quarantined a damaged packed block"),
                    Err(e) => tracing::error!(block = %key, reason, error = %e, "a damaged packed block could not be copied to quarantine; dropping it"),
                }
                Ok(())
            })
            .await?;
            let deleted = match disk.volumes() {
                Ok(volumes) => volumes.delete(packed).await,
                Err(e) => Err(e),
            };
            self.on_disk(&disk, deleted).await?;
            self.publish_gauges();
            return Ok(true);
        }
        let reason = reason.to_string();
        let fsync = self.fsync;
        blocking(move || {
            // The sidecar marks a block as committed: it goes first.
            recovery::quarantine(&paths, &paths.sidecar(key), &reason);
            recovery::quarantine(&paths, &paths.data(key), &reason);
            if fsync {
                recovery::sync_dir(&paths.shard_dir(key))?;
            }
            Ok(())
        })
        .await?;
        self.publish_gauges();
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::BlockId;

    #[tokio::test]
    async fn flipped_bytes_and_truncation_are_found_and_the_file_quarantined() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlockStore::open(dir.path(), 4096, false).await.unwrap();
        let pacer = Pacer::new(0);
        let data: Vec<u8> = (0..3 * 1024 * 1024 + 100)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        let mut keys = Vec::new();
        for i in 0..3 {
            let key = BlockKey::new(BlockId(40 + i), 0);
            store
                .write_chunks(
                    key,
                    0,
                    4096,
                    checksum::compute(&data, 4096),
                    bytes::Bytes::from(data.clone()),
                )
                .await
                .unwrap();
            store.commit(key, data.len() as u64).await.unwrap();
            keys.push(key);
        }
        assert_eq!(
            store.verify_block(keys[0], &pacer).await.unwrap(),
            (Verified::Whole, data.len() as u64)
        );
        // One byte flipped deep in the second block file.
        let path = store.data_path(keys[1]);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[2 * 1024 * 1024 + 5] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let (verified, _) = store.verify_block(keys[1], &pacer).await.unwrap();
        assert!(
            matches!(&verified, Verified::Corrupt(why) if why.contains(&(2 * 1024 * 1024).to_string())),
            "{verified:?}"
        );
        // The third truncated.
        std::fs::File::options()
            .write(true)
            .open(store.data_path(keys[2]))
            .unwrap()
            .set_len(100)
            .unwrap();
        assert!(matches!(
            store.verify_block(keys[2], &pacer).await.unwrap().0,
            Verified::Corrupt(_)
        ));
        assert_eq!(
            store
                .verify_block(BlockKey::new(BlockId(99), 0), &pacer)
                .await
                .unwrap()
                .0,
            Verified::Gone
        );

        let mut removals = store.subscribe_removals();
        let used = store.stats().used;
        assert!(store.quarantine_block(keys[1], "test").await.unwrap());
        assert!(!store.quarantine_block(keys[1], "test").await.unwrap());
        assert_eq!(removals.recv().await.unwrap(), keys[1]);
        assert_eq!(store.block(keys[1]), None);
        assert_eq!(store.stats().used, used - data.len() as u64);
        assert!(!store.data_path(keys[1]).exists());
        let quarantined = dir
            .path()
            .join("quarantine")
            .join(format!("{}.data", keys[1]));
        assert_eq!(std::fs::read(quarantined).unwrap(), bytes);
        assert_eq!(store.quarantined_blocks(), vec![keys[1]]);
        // A restart does not bring it back.
        drop(store);
        let store = BlockStore::open(dir.path(), 4096, false).await.unwrap();
        assert_eq!(store.block(keys[1]), None);
        assert!(store.block(keys[0]).is_some());
    }
}
