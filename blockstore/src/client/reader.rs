//! The key reader: positioned reads of any byte range of a committed object.
//!
//! A range becomes segments (one per EC data cell, or per replicated piece),
//! read in parallel and joined in order. A failed EC cell is rebuilt from any
//! `data` other cells of its stripe; a failed replica falls over to the next.
//! The reader is immutable once built, so concurrent reads share it lock-free.

use super::{ClientError, StoreClient};
use crate::codec::Codec;
use crate::ids::{BlockId, BlockKey};
use crate::layout::{EcLayout, ReplicationConfig};
use crate::meta::{MetaError, ObjectRecord};
use bytes::{Bytes, BytesMut};
use futures::future::join_all;
use futures::StreamExt;
use std::sync::Arc;

/// Largest replicated read sent to one datanode; pieces of a long range go
/// to different replicas.
const REPLICATED_PIECE: u64 = 1024 * 1024;

/// Segment reads in flight for one `read_at`.
const READ_CONCURRENCY: usize = 12;

/// Reads any range of one committed object.
pub struct KeyReader {
    client: StoreClient,
    size: u64,
    shape: Shape,
    groups: Vec<GroupView>,
}

/// How the object's groups are laid out, checked once at construction.
enum Shape {
    Ec {
        layout: EcLayout,
        codec: Arc<Codec>,
    },
    Replicated,
    /// The record cannot be read; every read fails with this reason.
    Invalid(String),
}

/// One group of the object, where it starts and who holds it.
struct GroupView {
    /// Object offset of the group's first byte.
    start: u64,
    len: u64,
    block: BlockId,
    /// EC: the holder of internal block `i` at `i` (None when meta lists
    /// none). Replicated: every replica.
    targets: Vec<Option<(BlockKey, String)>>,
}

/// A piece of a read served by one block file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment {
    group: usize,
    /// EC: data cell (internal block) index. Replicated: 0.
    index: usize,
    /// EC: stripe within the group. Replicated: piece number within the group.
    stripe: u64,
    /// Offset within the block file.
    offset: u64,
    len: u64,
}

impl KeyReader {
    pub(crate) fn new(client: StoreClient, record: &ObjectRecord) -> Self {
        let mut shape = match record.replication {
            ReplicationConfig::Ec(layout) if layout.cell_size == 0 => {
                Shape::Invalid(format!("zero cell size in {}", record.replication))
            }
            ReplicationConfig::Ec(layout) => {
                match Codec::get(layout.data as usize, layout.parity as usize) {
                    Ok(codec) => Shape::Ec { layout, codec },
                    Err(e) => Shape::Invalid(e.to_string()),
                }
            }
            ReplicationConfig::Replicated { .. } => Shape::Replicated,
        };
        let mut groups = Vec::with_capacity(record.groups.len());
        let mut start = 0u64;
        for g in &record.groups {
            let width = match record.replication {
                ReplicationConfig::Ec(layout) => layout.width(),
                ReplicationConfig::Replicated { .. } => g.replicas.len(),
            };
            let mut targets = vec![None; width];
            for (position, (key, replica)) in g.block_keys().enumerate() {
                let slot = match record.replication {
                    ReplicationConfig::Ec(_) => key.index as usize,
                    ReplicationConfig::Replicated { .. } => position,
                };
                match targets.get_mut(slot) {
                    Some(t @ None) => *t = Some((key, replica.addr.clone())),
                    _ => {
                        shape = Shape::Invalid(format!(
                            "block {} lists internal block {} twice or out of range",
                            g.block, key.index
                        ))
                    }
                }
            }
            groups.push(GroupView {
                start,
                len: g.length,
                block: g.block,
                targets,
            });
            start += g.length;
        }
        if start != record.size {
            shape = Shape::Invalid(format!(
                "object is {} bytes but its groups hold {start}",
                record.size
            ));
        }
        Self {
            client,
            size: record.size,
            shape,
            groups,
        }
    }

    /// Object length in bytes.
    pub fn len(&self) -> u64 {
        self.size
    }

    /// True for a 0-byte object.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// Reads `len` bytes at `offset` (clamped to the object's end), without a
    /// lock; reconstructs from other cells or replicas when a datanode fails.
    pub async fn read_at(&self, offset: u64, len: usize) -> Result<Bytes, ClientError> {
        if let Shape::Invalid(why) = &self.shape {
            return Err(MetaError::Protocol(format!("unreadable object record: {why}")).into());
        }
        if offset >= self.size || len == 0 {
            return Ok(Bytes::new());
        }
        let end = offset.saturating_add(len as u64).min(self.size);
        let segments = match &self.shape {
            Shape::Ec { layout, .. } => plan_ec(&self.groups, layout, offset, end),
            _ => plan_replicated(&self.groups, offset, end),
        };
        metrics::counter!("tessera_client_read_bytes_total").increment(end - offset);
        if let [only] = segments[..] {
            return self.read_segment(only).await;
        }
        let mut out = BytesMut::with_capacity((end - offset) as usize);
        let mut reads = futures::stream::iter(segments)
            .map(|s| self.read_segment(s))
            .buffered(READ_CONCURRENCY);
        while let Some(piece) = reads.next().await {
            out.extend_from_slice(&piece?);
        }
        Ok(out.freeze())
    }

    async fn read_segment(&self, seg: Segment) -> Result<Bytes, ClientError> {
        match &self.shape {
            Shape::Ec { layout, codec } => self.read_ec_segment(layout, codec, seg).await,
            _ => self.read_replicated_segment(seg).await,
        }
    }

    async fn read_replicated_segment(&self, seg: Segment) -> Result<Bytes, ClientError> {
        let group = &self.groups[seg.group];
        let replicas: Vec<&(BlockKey, String)> = group.targets.iter().flatten().collect();
        let count = replicas.len();
        // Consecutive pieces start at different replicas to spread the load.
        let first = (seg.stripe as usize).wrapping_add(seg.group) % count.max(1);
        let mut last_error = None;
        for k in 0..count {
            let (key, addr) = replicas[(first + k) % count];
            match self.read_exact(addr, *key, seg.offset, seg.len).await {
                Ok(bytes) => return Ok(bytes),
                Err(e @ ClientError::Meta(_)) => return Err(e),
                Err(e) => {
                    tracing::warn!(datanode = %addr, block = %key, error = %e, "replica read failed; trying the next replica");
                    last_error = Some(e);
                }
            }
        }
        Err(ClientError::Unavailable(match last_error {
            Some(e) => format!("block {}: every replica failed, last: {e}", group.block),
            None => format!("block {}: no replicas", group.block),
        }))
    }

    async fn read_ec_segment(
        &self,
        layout: &EcLayout,
        codec: &Arc<Codec>,
        seg: Segment,
    ) -> Result<Bytes, ClientError> {
        let group = &self.groups[seg.group];
        match &group.targets[seg.index] {
            Some((key, addr)) => match self.read_exact(addr, *key, seg.offset, seg.len).await {
                Ok(bytes) => return Ok(bytes),
                Err(e @ ClientError::Meta(_)) => return Err(e),
                Err(e) => tracing::warn!(
                    datanode = %addr, block = %key, error = %e,
                    "EC cell read failed; reconstructing from the other cells"
                ),
            },
            None => tracing::warn!(
                block = %group.block, index = seg.index,
                "no location for EC internal block; reconstructing"
            ),
        }
        metrics::counter!("tessera_client_degraded_reads_total").increment(1);
        self.reconstruct(layout, codec, seg).await
    }

    /// Rebuilds the bytes of `seg` from the same byte range of any `data`
    /// other cells of its stripe (RS codes each byte position on its own).
    /// Short cells count as zero-padded, as they were when encoded.
    async fn reconstruct(
        &self,
        layout: &EcLayout,
        codec: &Arc<Codec>,
        seg: Segment,
    ) -> Result<Bytes, ClientError> {
        let group = &self.groups[seg.group];
        let data = layout.data as usize;
        let in_cell = seg.offset - seg.stripe * layout.cell_size as u64;
        let n = seg.len as usize;
        let mut cells: Vec<Option<Vec<u8>>> = vec![None; layout.width()];
        let mut present = 0;
        let mut sources = Vec::new();
        for (i, cell) in cells.iter_mut().enumerate() {
            if i == seg.index {
                continue;
            }
            // Parity cells are as long as data cell 0.
            let cell_len = layout.cell_len(group.len, seg.stripe, if i < data { i } else { 0 });
            let wanted = cell_len.saturating_sub(in_cell).min(seg.len);
            if wanted == 0 {
                // Past the end of a short cell: known padding, nothing to read.
                *cell = Some(vec![0; n]);
                present += 1;
            } else {
                sources.push((i, wanted));
            }
        }
        // Data cells first (in index order), then parity.
        let mut sources = sources.into_iter();
        while present < data {
            let batch: Vec<(usize, u64)> = sources.by_ref().take(data - present).collect();
            if batch.is_empty() {
                return Err(ClientError::Unavailable(format!(
                    "block {} stripe {}: only {present} of the {data} cells needed are readable",
                    group.block, seg.stripe
                )));
            }
            let reads = batch.iter().map(|&(i, wanted)| async move {
                let result = match &group.targets[i] {
                    Some((key, addr)) => self
                        .read_exact(addr, *key, seg.offset, wanted)
                        .await
                        .inspect_err(|e| {
                            tracing::warn!(datanode = %addr, block = %key, error = %e, "EC cell unreadable during reconstruction")
                        }),
                    None => Err(ClientError::Unavailable(format!("no location for cell {i}"))),
                };
                (i, result)
            });
            for (i, result) in join_all(reads).await {
                if let Ok(bytes) = result {
                    let mut cell = Vec::with_capacity(n);
                    cell.extend_from_slice(&bytes);
                    cell.resize(n, 0);
                    cells[i] = Some(cell);
                    present += 1;
                }
            }
        }
        let codec = codec.clone();
        let index = seg.index;
        let rebuilt = tokio::task::spawn_blocking(move || {
            codec
                .reconstruct_data(&mut cells)
                .map(|()| cells.swap_remove(index))
        })
        .await
        .map_err(|e| ClientError::Unavailable(format!("reconstruction task: {e}")))?
        .map_err(|e| ClientError::Unavailable(format!("block {}: {e}", group.block)))?;
        rebuilt.map(Bytes::from).ok_or_else(|| {
            ClientError::Unavailable(format!("block {}: cell {index} not rebuilt", group.block))
        })
    }

    /// One block read that must return exactly `len` bytes.
    async fn read_exact(
        &self,
        addr: &str,
        key: BlockKey,
        offset: u64,
        len: u64,
    ) -> Result<Bytes, ClientError> {
        let bytes = self
            .client
            .pool()
            .read_block(addr, key, offset, len)
            .await?;
        if bytes.len() as u64 != len {
            return Err(ClientError::Protocol {
                addr: addr.to_string(),
                message: format!("{key}: asked {len} bytes at {offset}, got {}", bytes.len()),
            });
        }
        Ok(bytes)
    }
}

/// Index of the first group holding bytes at or after `offset`.
fn first_group(groups: &[GroupView], offset: u64) -> usize {
    groups.partition_point(|g| g.start + g.len <= offset)
}

/// Object range `offset..end` as cell segments: each within one data cell of
/// one stripe of one group.
fn plan_ec(groups: &[GroupView], layout: &EcLayout, offset: u64, end: u64) -> Vec<Segment> {
    let cell = layout.cell_size as u64;
    let mut out = Vec::new();
    for (g, group) in groups.iter().enumerate().skip(first_group(groups, offset)) {
        if group.start >= end {
            break;
        }
        let mut pos = offset.max(group.start) - group.start;
        let stop = end.min(group.start + group.len) - group.start;
        while pos < stop {
            let at = layout.locate(pos);
            let len = (stop - pos).min(cell - at.offset_in_cell);
            out.push(Segment {
                group: g,
                index: at.cell,
                stripe: at.stripe,
                offset: at.internal_offset(layout),
                len,
            });
            pos += len;
        }
    }
    out
}

/// Object range `offset..end` as replicated pieces, cut at multiples of
/// `REPLICATED_PIECE` within each block.
fn plan_replicated(groups: &[GroupView], offset: u64, end: u64) -> Vec<Segment> {
    let mut out = Vec::new();
    for (g, group) in groups.iter().enumerate().skip(first_group(groups, offset)) {
        if group.start >= end {
            break;
        }
        let mut pos = offset.max(group.start) - group.start;
        let stop = end.min(group.start + group.len) - group.start;
        while pos < stop {
            let len = (stop - pos).min(REPLICATED_PIECE - pos % REPLICATED_PIECE);
            out.push(Segment {
                group: g,
                index: 0,
                stripe: pos / REPLICATED_PIECE,
                offset: pos,
                len,
            });
            pos += len;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAYOUT: EcLayout = EcLayout {
        data: 3,
        parity: 2,
        cell_size: 10,
    };

    fn groups(lens: &[u64]) -> Vec<GroupView> {
        let mut start = 0;
        lens.iter()
            .enumerate()
            .map(|(i, &len)| {
                let g = GroupView {
                    start,
                    len,
                    block: BlockId(i as u64),
                    targets: Vec::new(),
                };
                start += len;
                g
            })
            .collect()
    }

    fn seg(group: usize, index: usize, stripe: u64, offset: u64, len: u64) -> Segment {
        Segment {
            group,
            index,
            stripe,
            offset,
            len,
        }
    }

    #[test]
    fn ec_range_within_one_cell() {
        let g = groups(&[60]);
        assert_eq!(plan_ec(&g, &LAYOUT, 12, 15), vec![seg(0, 1, 0, 2, 3)]);
    }

    #[test]
    fn ec_range_across_cells_and_stripes() {
        let g = groups(&[60]);
        assert_eq!(
            plan_ec(&g, &LAYOUT, 25, 42),
            vec![
                seg(0, 2, 0, 5, 5),
                seg(0, 0, 1, 10, 10),
                seg(0, 1, 1, 10, 2),
            ]
        );
    }

    #[test]
    fn ec_range_across_groups_and_partial_last_stripe() {
        // Two full groups of two stripes, then a group with 14 bytes.
        let g = groups(&[60, 60, 14]);
        assert_eq!(
            plan_ec(&g, &LAYOUT, 55, 200),
            vec![
                seg(0, 2, 1, 15, 5),
                seg(1, 0, 0, 0, 10),
                seg(1, 1, 0, 0, 10),
                seg(1, 2, 0, 0, 10),
                seg(1, 0, 1, 10, 10),
                seg(1, 1, 1, 10, 10),
                seg(1, 2, 1, 10, 10),
                seg(2, 0, 0, 0, 10),
                seg(2, 1, 0, 0, 4),
            ]
        );
    }

    #[test]
    fn ec_segments_cover_every_range_exactly() {
        let g = groups(&[60, 60, 23]);
        let total = 143;
        for offset in 0..total {
            for end in offset + 1..=total {
                let segs = plan_ec(&g, &LAYOUT, offset, end);
                assert_eq!(segs.iter().map(|s| s.len).sum::<u64>(), end - offset);
                // Each segment maps back to consecutive object bytes.
                let mut pos = offset;
                for s in segs {
                    let group = &g[s.group];
                    let at = LAYOUT.locate(pos - group.start);
                    assert_eq!((at.cell, at.stripe), (s.index, s.stripe));
                    assert_eq!(at.internal_offset(&LAYOUT), s.offset);
                    assert!(s.len > 0 && at.offset_in_cell + s.len <= 10);
                    assert!(s.len <= LAYOUT.cell_len(group.len, s.stripe, s.index));
                    pos += s.len;
                }
            }
        }
    }

    #[test]
    fn replicated_range_splits_at_pieces_and_blocks() {
        let mib = REPLICATED_PIECE;
        let g = groups(&[3 * mib, mib / 2]);
        assert_eq!(
            plan_replicated(&g, mib - 5, 3 * mib + 7),
            vec![
                seg(0, 0, 0, mib - 5, 5),
                seg(0, 0, 1, mib, mib),
                seg(0, 0, 2, 2 * mib, mib),
                seg(1, 0, 0, 0, 7),
            ]
        );
    }

    #[test]
    fn zero_length_groups_yield_no_segments() {
        let g = groups(&[0, 30]);
        assert_eq!(plan_ec(&g, &LAYOUT, 0, 5), vec![seg(1, 0, 0, 0, 5)]);
        assert_eq!(plan_replicated(&g, 0, 5), vec![seg(1, 0, 0, 0, 5)]);
    }
}
