//! Compaction: a volume whose deleted records pass a share of its bytes is
//! rewritten. Each live record is read and checked, appended to the open
//! volume like any commit, and the index moved to the copy, unless the
//! block was deleted meanwhile (then the copy is tombstoned); once every
//! record has moved, the old volume is removed. Readers holding the old
//! volume's descriptor go on reading the same bytes from it. A crash part
//! way leaves both copies of some records: at start the newer generation is
//! the block, the older is garbage, and the next compaction clears it.

use super::disks::Disk;
use super::volumes::{NewCell, Packed, VolumeUse};
use super::{blocking, BlockStore, Place};
use crate::error::StoreError;
use block_client::Pacer;
use bytes::Bytes;
use proto::BlockKey;

/// Bytes of records a compaction reads and appends together at most.
const STEP: u64 = 4 << 20;

/// What one compaction did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Compacted {
    /// The volume rewritten and removed.
    pub volume: u32,
    /// Records copied to the open volume.
    pub records: u64,
    /// Bytes of records copied.
    pub bytes: u64,
    /// Bytes the volume held, live and dead, now freed.
    pub freed: u64,
    /// Block files found damaged on the way and taken out of service.
    pub damaged: Vec<(BlockKey, String)>,
}

impl BlockStore {
    /// The volume most worth compacting, with the number of its disk: not
    /// an open one, its deleted records at least `garbage_ratio` of its
    /// bytes; the one with the most garbage first.
    pub fn compaction_candidate(&self, garbage_ratio: f64) -> Option<(u16, VolumeUse)> {
        self.volume_usage()
            .into_iter()
            .filter(|(disk, u)| {
                let active = self.disk(*disk).volumes().map_or(0, |v| v.active());
                u.volume != active && u.bytes > 0
            })
            .filter(|(_, u)| (u.bytes - u.live) as f64 >= garbage_ratio * u.bytes as f64)
            .max_by_key(|(_, u)| u.bytes - u.live)
    }

    /// Rewrites volume `volume` of disk `disk`: copies its live records to
    /// the disk's open volume, `pacer` spacing their bytes, then removes it.
    pub async fn compact_volume(
        &self,
        disk: u16,
        volume: u32,
        pacer: &Pacer,
    ) -> Result<Compacted, StoreError> {
        let disk = self
            .disks
            .get(usize::from(disk))
            .cloned()
            .ok_or_else(|| StoreError::Invalid(format!("no disk {disk}")))?;
        let compacted = self.compact_on(&disk, volume, pacer).await;
        self.on_disk(&disk, compacted).await
    }

    async fn compact_on(
        &self,
        disk: &Disk,
        volume: u32,
        pacer: &Pacer,
    ) -> Result<Compacted, StoreError> {
        let volumes = disk.volumes()?;
        if volume == volumes.active() {
            return Err(StoreError::Invalid(format!(
                "volume {volume} is open for appends"
            )));
        }
        let freed = volumes
            .usage()
            .iter()
            .find(|u| u.volume == volume)
            .map_or(0, |u| u.bytes);
        let mut live: Vec<(BlockKey, Packed)> = self
            .index
            .read()
            .blocks
            .iter()
            .filter(|(_, stored)| stored.disk == disk.number)
            .filter_map(|(key, stored)| match stored.place {
                Place::Packed(p) if p.volume == volume => Some((*key, p)),
                _ => None,
            })
            .collect();
        live.sort_unstable_by_key(|(_, p)| p.offset);
        let mut done = Compacted {
            volume,
            freed,
            ..Compacted::default()
        };
        // Records go in steps: read together, appended together, so that one
        // group commit carries a whole step.
        // A paced compaction takes steps of a quarter second's bytes at most.
        let step_max = match pacer.rate() {
            0 => STEP,
            rate => STEP.min(rate / 4),
        };
        let mut rest = live.as_slice();
        while !rest.is_empty() {
            let mut take = 0;
            let mut bytes = 0;
            while take < rest.len()
                && (take == 0 || bytes + rest[take].1.head.record_len() <= step_max)
            {
                bytes += rest[take].1.head.record_len();
                take += 1;
            }
            let (step, later) = rest.split_at(take);
            rest = later;
            pacer.take(bytes).await;
            let reader = volumes.clone();
            let records: Vec<Packed> = step.iter().map(|(_, p)| *p).collect();
            let read = blocking(move || {
                Ok(records
                    .iter()
                    .map(|p| reader.read_record(p))
                    .collect::<Vec<_>>())
            })
            .await?;
            let mut copies = Vec::with_capacity(step.len());
            for (&(key, old), read) in step.iter().zip(read) {
                let (crcs, data) = match read {
                    Ok(read) => read,
                    Err(e @ StoreError::Corrupt { .. }) => {
                        let reason = e.to_string();
                        if self.quarantine_block(key, &reason).await? {
                            done.damaged.push((key, reason));
                        }
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                let cell = NewCell {
                    key,
                    bytes_per_checksum: old.head.bytes_per_checksum,
                    length: old.head.length,
                    crcs,
                    pieces: vec![Bytes::from(data)],
                };
                copies.push(async move { (key, old, volumes.append(cell).await) });
            }
            for (key, old, copy) in futures::future::join_all(copies).await {
                let copy = copy?;
                let moved = {
                    let mut index = self.index.write();
                    match index.blocks.get_mut(&key) {
                        Some(stored)
                            if stored.disk == disk.number && stored.place == Place::Packed(old) =>
                        {
                            stored.place = Place::Packed(copy);
                            true
                        }
                        _ => false,
                    }
                };
                if !moved {
                    // Deleted while it was copied: so is the copy.
                    volumes.delete(copy).await?;
                    continue;
                }
                done.records += 1;
                done.bytes += old.head.record_len();
            }
        }
        volumes.retire(volume).await?;
        self.publish_gauges();
        Ok(done)
    }
}
