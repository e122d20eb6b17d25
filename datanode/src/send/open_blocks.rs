//! Committed blocks kept open between reads, and where each block's readers
//! have got to.
//!
//! Opening a block for a read costs two opens, a stat and a sidecar read (a
//! record header read for a packed block), on the blocking pool: more than
//! sending a 64 KiB reply from the page cache.
//! Committed blocks never change, so a bounded set of them stays open with
//! all their CRCs, and a read's range is cut from those on the executor.
//! An entry is dropped when the store reports the block deleted, and every
//! lookup also checks that the index still holds the block as it was: a
//! read never finds a deleted block here.
//!
//! Each entry also tracks where reads of the block ended and how far the
//! kernel was asked to read ahead ([`Readahead`]), so only reads that look
//! sequential ask for more, and only for the part not asked for before.

use crate::error::StoreError;
use crate::store::{BlockMeta, BlockStore};
use parking_lot::Mutex;
use proto::wire::{ReadData, MAX_PAYLOAD_LEN};
use proto::{checksum, BlockKey};
use std::fs::File;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::broadcast;

/// Blocks kept open by default: each holds a descriptor and its CRCs (64 KiB
/// for a 256 MiB block of 16 KiB chunks).
pub(crate) const DEFAULT_OPEN_BLOCKS: usize = 256;
/// A read at least this long counts as sequential on its own.
const LARGE_READ: u64 = 512 * 1024;

/// One open committed block.
#[derive(Debug)]
pub(crate) struct OpenBlock {
    pub(super) meta: BlockMeta,
    /// The block's data file, or the volume holding it.
    pub(crate) file: Arc<File>,
    /// Offset in `file` of the block's first byte.
    pub(crate) base: u64,
    pub(super) crcs: Vec<u32>,
    /// Where this block's readers have got to.
    pub(crate) readahead: Readahead,
}

/// A chunk-aligned range of an open block, ready to send.
#[derive(Debug)]
pub(crate) struct OpenRange {
    /// The reply header: the range actually sent and its CRCs.
    pub(crate) header: ReadData,
    /// The block the bytes come from.
    pub(crate) block: Arc<OpenBlock>,
}

/// Where a block's reads ended last and how far ahead the kernel was asked
/// to read: lock-free, a stale view costs at most one extra advice.
#[derive(Debug, Default)]
pub(crate) struct Readahead {
    last_end: AtomicU64,
    advised_until: AtomicU64,
}

impl Readahead {
    /// Records a read of `[offset, end)`; returns the part of the block the
    /// kernel should now be asked to read ahead, if any. Only reads that
    /// look sequential (starting where one ended, inside the window already
    /// advised, or large) ask, and only once at least half of a `window`
    /// past `end` has not been asked for yet.
    pub(crate) fn after_read(
        &self,
        offset: u64,
        end: u64,
        window: u64,
        block_len: u64,
    ) -> Option<(u64, u64)> {
        let previous_end = self.last_end.swap(end, Ordering::Relaxed);
        let advised = self.advised_until.load(Ordering::Relaxed);
        let sequential = end - offset >= LARGE_READ
            || offset == previous_end
            || (offset > previous_end && offset < advised);
        if !sequential || window == 0 {
            return None;
        }
        let target = end.saturating_add(window).min(block_len);
        let from = advised.max(end);
        if target <= from || target - from < window / 2 && target < block_len {
            return None;
        }
        // Another read may have advised meanwhile: only one of them asks.
        self.advised_until
            .compare_exchange(advised, target, Ordering::Relaxed, Ordering::Relaxed)
            .ok()?;
        Some((from, target - from))
    }
}

/// A bounded set of open committed blocks, invalidated as blocks are deleted.
pub(crate) struct OpenBlocks {
    entries: Mutex<lru::LruCache<proto::BlockKey, Arc<OpenBlock>>>,
}

impl OpenBlocks {
    /// Keeps up to `capacity` blocks of `store` open, forgetting each as the
    /// store deletes it (a task watches the store's removals until the
    /// returned set is dropped).
    pub(crate) fn new(store: &BlockStore, capacity: usize) -> Arc<Self> {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        let blocks = Arc::new(Self {
            entries: Mutex::new(lru::LruCache::new(capacity)),
        });
        let mut removals = store.subscribe_removals();
        let weak = Arc::downgrade(&blocks);
        tokio::spawn(async move {
            loop {
                let removed = removals.recv().await;
                let Some(blocks) = weak.upgrade() else { return };
                match removed {
                    Ok(key) => {
                        blocks.entries.lock().pop(&key);
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => blocks.entries.lock().clear(),
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        blocks
    }

    /// Opens the chunk-aligned range covering `[offset, offset + length)` of
    /// committed block `key`, as [`BlockStore::open_range`] does, from an
    /// open block when there is one.
    pub(crate) async fn open_range(
        &self,
        store: &BlockStore,
        key: BlockKey,
        offset: u64,
        length: u64,
    ) -> Result<OpenRange, StoreError> {
        let meta = store.block(key).ok_or(StoreError::NotFound(key))?;
        let cached = self.entries.lock().get(&key).cloned();
        let block = match cached {
            Some(block) if block.meta == meta => block,
            _ => {
                let opened = store.open_whole(key).await?;
                let meta = opened.meta;
                let block = Arc::new(OpenBlock {
                    meta,
                    file: opened.file,
                    base: opened.base,
                    crcs: opened.crcs,
                    readahead: Readahead::default(),
                });
                // Deleted while it was opened: serve this read, keep nothing.
                if store.block(key) == Some(meta) {
                    self.entries.lock().put(key, block.clone());
                }
                block
            }
        };
        let header = cut_range(key, &block, offset, length)?;
        Ok(OpenRange { header, block })
    }
}

/// The reply header for `[offset, offset + length)` of `block`: the span
/// widened to chunk boundaries, and its CRCs.
fn cut_range(
    key: BlockKey,
    block: &OpenBlock,
    offset: u64,
    length: u64,
) -> Result<ReadData, StoreError> {
    let meta = block.meta;
    match offset.checked_add(length) {
        Some(end) if end <= meta.length => {}
        _ => {
            return Err(StoreError::OutOfRange {
                key,
                offset,
                length,
                block_length: meta.length,
            })
        }
    }
    let bpc = meta.bytes_per_checksum;
    let (start, end) = checksum::aligned_span(offset, length, meta.length, bpc);
    if end - start > u64::from(MAX_PAYLOAD_LEN) {
        return Err(StoreError::Invalid(format!(
            "block {key}: {} bytes asked in one read, the limit is {MAX_PAYLOAD_LEN}",
            end - start
        )));
    }
    let first = (start / u64::from(bpc)) as usize;
    let count = checksum::chunk_count(end - start, bpc) as usize;
    let crcs = block
        .crcs
        .get(first..first + count)
        .ok_or_else(|| StoreError::Invalid(format!("block {key}: fewer CRCs than chunks")))?
        .to_vec();
    Ok(ReadData {
        offset: start,
        length: end - start,
        bytes_per_checksum: bpc,
        crcs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    #[tokio::test]
    async fn ranges_match_the_store_and_deleted_blocks_are_not_served() {
        const BPC: u32 = 4096;
        let dir = tempfile::tempdir().unwrap();
        let store = BlockStore::open(dir.path(), BPC, false).await.unwrap();
        let key = BlockKey::new(proto::BlockId(7), 0);
        let data: Vec<u8> = (0..50_000u32).map(|i| (i % 253) as u8).collect();
        let crcs = checksum::compute(&data, BPC);
        store
            .write_chunks(key, 0, BPC, crcs, data.clone().into())
            .await
            .unwrap();
        store.commit(key, data.len() as u64).await.unwrap();
        let blocks = OpenBlocks::new(&store, 4);
        for (offset, len) in [(0, 100), (5000, 20_000), (49_000, 1000), (0, 50_000)] {
            let want = store.open_range(key, offset, len).await.unwrap().header;
            // Twice: the first opens the block, the second finds it open.
            for _ in 0..2 {
                let got = blocks.open_range(&store, key, offset, len).await.unwrap();
                assert_eq!(got.header, want, "{offset}+{len}");
            }
        }
        assert!(matches!(
            blocks.open_range(&store, key, 49_000, 1001).await,
            Err(StoreError::OutOfRange { .. })
        ));
        assert!(store.delete(key).await.unwrap());
        assert!(matches!(
            blocks.open_range(&store, key, 0, 100).await,
            Err(StoreError::NotFound(k)) if k == key
        ));
    }

    #[test]
    fn random_small_reads_never_ask_for_readahead() {
        let r = Readahead::default();
        for offset in [10 * MIB, 3 * MIB, 40 * MIB, 7 * MIB] {
            assert_eq!(
                r.after_read(offset, offset + 65536, 4 * MIB, 256 * MIB),
                None
            );
        }
    }

    #[test]
    fn a_sequential_run_asks_once_per_half_window_and_never_twice_for_a_byte() {
        let r = Readahead::default();
        let mut asked = Vec::new();
        let mut at = 0;
        while at < 16 * MIB {
            if let Some(span) = r.after_read(at, at + 65536, 4 * MIB, 256 * MIB) {
                asked.push(span);
            }
            at += 65536;
        }
        assert_eq!(asked[0], (65536, 4 * MIB));
        for pair in asked.windows(2) {
            assert_eq!(
                pair[0].0 + pair[0].1,
                pair[1].0,
                "advised spans are contiguous"
            );
        }
        assert!(asked.len() <= 1 + 16 * 2, "{} advices", asked.len());
    }

    #[test]
    fn large_reads_ask_for_readahead_up_to_the_block_end() {
        let r = Readahead::default();
        assert_eq!(
            r.after_read(100 * MIB, 101 * MIB, 4 * MIB, 103 * MIB),
            Some((101 * MIB, 2 * MIB))
        );
        assert_eq!(r.after_read(101 * MIB, 102 * MIB, 4 * MIB, 103 * MIB), None);
    }
}
