//! The key reader: positioned reads of any byte range of a committed object.
//!
//! A range becomes segments (one per EC data cell, or per replicated piece),
//! read in parallel. `read_chunks_at` hands back the segments' own buffers;
//! `read_at` joins them (the one copy of the healthy path). A failed EC cell
//! is rebuilt from any `data` other cells of its stripe (see `reconstruct`);
//! a failed replica falls over to the next.
//!
//! The reader is immutable once built (its only mutable state is atomics:
//! the closed flag and a copy counter), so positioned and sequential reads
//! share it without a lock, and a read waiting on a slow datanode holds
//! nothing another read needs (HDDS-17399). Each segment read has a deadline
//! (`ClientConfig::read_deadline`); a datanode that fails or misses it is
//! marked in the client's `SuspectDatanodes` and skipped by later reads for a
//! while, so a degraded read does not wait on a dead host once per segment.

mod reconstruct;

use super::{ClientError, StoreClient};
use bytes::{Bytes, BytesMut};
use codec::Codec;
use futures::future::join_all;
use futures::StreamExt;
use meta_api::{MetaError, ObjectRecord};
use proto::ids::{BlockId, BlockKey, DatanodeId};
use proto::layout::{EcLayout, ReplicationConfig};
use proto::token::BlockToken;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    /// Set by `close`; checked before every datanode request.
    closed: AtomicBool,
    /// Bytes this reader memcpy'd after they landed from a datanode.
    copied: AtomicU64,
    /// Positioned reads in flight and lately: sequential streams of this
    /// reader shrink their read-ahead while there are any.
    pub(crate) positioned: Arc<crate::positioned::PositionedActivity>,
}

/// How the object's groups are laid out, checked once at construction.
enum Shape {
    Ec {
        layout: EcLayout,
        codec: Arc<Codec>,
    },
    Replicated,
    /// The bytes are in the record itself (`ObjectRecord::inline`).
    Inline(Bytes),
    /// The record cannot be read; every read fails with this reason.
    Invalid(String),
}

/// One block file and who serves it.
#[derive(Clone, Debug)]
struct Target {
    key: BlockKey,
    addr: String,
    datanode: DatanodeId,
    /// Meta's read token for the group.
    token: Option<BlockToken>,
}

/// One group of the object, where it starts and who holds it.
struct GroupView {
    /// Object offset of the group's first byte.
    start: u64,
    len: u64,
    block: BlockId,
    /// EC: the holder of internal block `i` at `i` (None when meta lists
    /// none). Replicated: every replica.
    targets: Vec<Option<Target>>,
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

/// How long one block read may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Patience {
    /// `read_deadline`: there is another way to get the bytes.
    Deadline,
    /// Only the connection's I/O timeout: the last way to get the bytes.
    Full,
}

impl KeyReader {
    pub(crate) fn new(client: StoreClient, record: &ObjectRecord) -> Self {
        let mut shape = match record.replication {
            ReplicationConfig::Ec(layout) if layout.cell_size == 0 => {
                Shape::Invalid(format!("zero cell size in {}", record.replication))
            }
            ReplicationConfig::Ec(layout) => {
                match client
                    .codecs()
                    .get(layout.data as usize, layout.parity as usize)
                {
                    Ok(codec) => Shape::Ec { layout, codec },
                    Err(e) => Shape::Invalid(e.to_string()),
                }
            }
            ReplicationConfig::Replicated { .. } => Shape::Replicated,
        };
        let mut start = 0u64;
        if let Some(inline) = &record.inline {
            shape = if record.groups.is_empty() {
                Shape::Inline(inline.0.clone())
            } else {
                Shape::Invalid("both an inline body and block groups".into())
            };
            start = inline.len() as u64;
        }
        let mut groups = Vec::with_capacity(record.groups.len());
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
                    Some(t @ None) => {
                        *t = Some(Target {
                            key,
                            addr: replica.addr.clone(),
                            datanode: replica.datanode.clone(),
                            token: g.token,
                        })
                    }
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
        // An encrypted body is stored sealed, longer than its plaintext:
        // the reader reads the stored bytes, the gateway opens them.
        if start != record.size && record.attributes.encryption.is_none() {
            shape = Shape::Invalid(format!(
                "object is {} bytes but its groups hold {start}",
                record.size
            ));
        }
        Self {
            size: start,
            shape,
            groups,
            closed: AtomicBool::new(false),
            copied: AtomicU64::new(0),
            positioned: client.positioned_activities().of(record.id),
            client,
        }
    }

    /// Stored length in bytes (the object's length, unless it is encrypted).
    pub fn len(&self) -> u64 {
        self.size
    }

    /// True for a 0-byte object.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// Closes the reader: every later read (and every segment of a read in
    /// progress not yet sent) fails with [`ClientError::Closed`] without
    /// contacting a datanode.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Bytes this reader copied after they arrived from datanodes (the join
    /// of `read_at`, reconstruction inputs); zero for `read_chunks_at` and
    /// sequential reads on the healthy path.
    pub fn copied_bytes(&self) -> u64 {
        self.copied.load(Ordering::Relaxed)
    }

    /// Bytes a sequential read asks for at once: one whole EC stripe, or
    /// one replicated piece.
    pub(crate) fn natural_piece(&self) -> u64 {
        match &self.shape {
            Shape::Ec { layout, .. } => layout.stripe_width(),
            _ => REPLICATED_PIECE,
        }
    }

    /// Bytes a sequential read keeps in flight (`ClientConfig::read_window`).
    pub fn read_window(&self) -> u64 {
        self.client.config().read_window
    }

    /// Bytes a sequential read keeps in flight while positioned reads share
    /// this reader (`ClientConfig::contended_read_window`).
    pub(crate) fn contended_read_window(&self) -> u64 {
        self.client.config().contended_read_window
    }

    /// Percent of the time a sequential read spends reading while positioned
    /// reads share this reader (`ClientConfig::contended_read_share`).
    pub(crate) fn contended_read_share(&self) -> u32 {
        self.client.config().contended_read_share
    }

    fn check_open(&self) -> Result<(), ClientError> {
        if self.is_closed() {
            return Err(ClientError::Closed);
        }
        Ok(())
    }

    fn count_copy(&self, bytes: usize) {
        self.copied.fetch_add(bytes as u64, Ordering::Relaxed);
        metrics::counter!(crate::telemetry::COPIED_BYTES.name).increment(bytes as u64);
    }

    /// The bytes of `len` at `offset` (clamped to the object's end) of an
    /// object held in its record; None for one in blocks.
    fn inline_range(&self, offset: u64, len: usize) -> Result<Option<Bytes>, ClientError> {
        let Shape::Inline(body) = &self.shape else {
            return Ok(None);
        };
        self.check_open()?;
        let start = offset.min(self.size);
        let end = offset.saturating_add(len as u64).min(self.size);
        metrics::counter!(crate::telemetry::INLINE_READ_BYTES.name).increment(end - start);
        Ok(Some(body.slice(start as usize..end as usize)))
    }

    /// The segments of `len` bytes at `offset`, clamped to the object's end.
    fn plan(&self, offset: u64, len: usize) -> Result<Vec<Segment>, ClientError> {
        self.check_open()?;
        if let Shape::Invalid(why) = &self.shape {
            return Err(MetaError::Protocol(format!("unreadable object record: {why}")).into());
        }
        if offset >= self.size || len == 0 {
            return Ok(Vec::new());
        }
        let end = offset.saturating_add(len as u64).min(self.size);
        metrics::counter!(crate::telemetry::READ_BYTES.name).increment(end - offset);
        Ok(match &self.shape {
            Shape::Ec { layout, .. } => plan_ec(&self.groups, layout, offset, end),
            _ => plan_replicated(&self.groups, offset, end),
        })
    }

    /// Reads `len` bytes at `offset` (clamped to the object's end), without a
    /// lock; reconstructs from other cells or replicas when a datanode fails.
    /// A range over several segments is joined into one buffer (counted in
    /// `tessera_client_copied_bytes_total`); see [`read_chunks_at`](Self::read_chunks_at).
    pub async fn read_at(&self, offset: u64, len: usize) -> Result<Bytes, ClientError> {
        let _positioned = self.positioned.start();
        if let Some(bytes) = self.inline_range(offset, len)? {
            return Ok(bytes);
        }
        let segments = self.plan(offset, len)?;
        match segments[..] {
            [] => return Ok(Bytes::new()),
            [only] => return self.read_segment(only).await,
            _ => {}
        }
        let total: u64 = segments.iter().map(|s| s.len).sum();
        let mut out = BytesMut::with_capacity(total as usize);
        let mut reads = futures::stream::iter(segments)
            .map(|s| self.read_segment(s))
            .buffered(READ_CONCURRENCY);
        while let Some(piece) = reads.next().await {
            let piece = piece?;
            out.extend_from_slice(&piece);
            self.count_copy(piece.len());
        }
        Ok(out.freeze())
    }

    /// The same bytes as [`read_at`](Self::read_at), as the segments' own
    /// buffers in order (each a slice of what landed from the socket, so
    /// nothing is copied on the healthy path). Empty when the range is.
    pub async fn read_chunks_at(&self, offset: u64, len: usize) -> Result<Vec<Bytes>, ClientError> {
        let _positioned = self.positioned.start();
        self.read_ahead_chunks(offset, len).await
    }

    /// [`read_chunks_at`](Self::read_chunks_at) for a sequential stream's
    /// read-ahead, which does not count as a positioned read.
    pub(crate) async fn read_ahead_chunks(
        &self,
        offset: u64,
        len: usize,
    ) -> Result<Vec<Bytes>, ClientError> {
        if let Some(bytes) = self.inline_range(offset, len)? {
            return Ok(if bytes.is_empty() {
                vec![]
            } else {
                vec![bytes]
            });
        }
        let segments = self.plan(offset, len)?;
        if let Shape::Ec { layout, codec } = &self.shape {
            if segments.iter().any(|s| self.cell_unavailable(s)) {
                return self.read_rows(layout, codec, segments).await;
            }
        }
        let mut out = Vec::with_capacity(segments.len());
        let mut reads = futures::stream::iter(segments)
            .map(|s| self.read_segment(s))
            .buffered(READ_CONCURRENCY);
        while let Some(piece) = reads.next().await {
            out.push(piece?);
        }
        Ok(out)
    }

    /// `segments` read stripe row by stripe row, for a read with cells on
    /// unavailable datanodes (see `read_row_degraded`).
    async fn read_rows(
        &self,
        layout: &EcLayout,
        codec: &Arc<Codec>,
        segments: Vec<Segment>,
    ) -> Result<Vec<Bytes>, ClientError> {
        let mut rows: Vec<Vec<Segment>> = Vec::new();
        for seg in segments {
            match rows.last_mut() {
                Some(row) if row[0].group == seg.group && row[0].stripe == seg.stripe => {
                    row.push(seg)
                }
                _ => rows.push(vec![seg]),
            }
        }
        let width = (layout.data as usize).max(1);
        let mut out = Vec::new();
        let mut reads = futures::stream::iter(rows)
            .map(|row| async move {
                if let Some(read) = self.read_row_degraded(layout, codec, &row).await {
                    return read;
                }
                let mut pieces = Vec::with_capacity(row.len());
                for piece in join_all(row.into_iter().map(|s| self.read_segment(s))).await {
                    pieces.push(piece?);
                }
                Ok(pieces)
            })
            .buffered(READ_CONCURRENCY.div_ceil(width));
        while let Some(pieces) = reads.next().await {
            out.extend(pieces?);
        }
        Ok(out)
    }

    async fn read_segment(&self, seg: Segment) -> Result<Bytes, ClientError> {
        match &self.shape {
            Shape::Ec { layout, codec } => self.read_ec_segment(layout, codec, seg).await,
            _ => self.read_replicated_segment(seg).await,
        }
    }

    async fn read_replicated_segment(&self, seg: Segment) -> Result<Bytes, ClientError> {
        let group = &self.groups[seg.group];
        let replicas: Vec<&Target> = group.targets.iter().flatten().collect();
        let count = replicas.len();
        // Consecutive pieces start at different replicas to spread the load;
        // replicas that failed recently go last.
        let first = (seg.stripe as usize).wrapping_add(seg.group) % count.max(1);
        let rotated = (0..count).map(|k| replicas[(first + k) % count]);
        let suspects = self.client.suspects();
        let (healthy, suspect): (Vec<&Target>, Vec<&Target>) =
            rotated.partition(|t| !suspects.is_suspect(&t.addr));
        let mut last_error = None;
        let mut gone = 0;
        for (k, target) in healthy.into_iter().chain(suspect).enumerate() {
            let patience = if k + 1 == count {
                Patience::Full
            } else {
                Patience::Deadline
            };
            match self.read_block(target, seg.offset, seg.len, patience).await {
                Ok(bytes) => return Ok(bytes),
                Err(e @ (ClientError::Meta(_) | ClientError::Closed)) => return Err(e),
                Err(e) => {
                    tracing::warn!(datanode = %target.addr, block = %target.key, error = %e, "replica read failed; trying the next replica");
                    gone += usize::from(e.is_gone());
                    last_error = Some(e);
                }
            }
        }
        let why = match last_error {
            Some(e) => format!("block {}: every replica failed, last: {e}", group.block),
            None => format!("block {}: no replicas", group.block),
        };
        Err(if gone == count {
            ClientError::Lost(why)
        } else {
            ClientError::Unavailable(why)
        })
    }

    async fn read_ec_segment(
        &self,
        layout: &EcLayout,
        codec: &Arc<Codec>,
        seg: Segment,
    ) -> Result<Bytes, ClientError> {
        let group = &self.groups[seg.group];
        // Whether the cell's own datanode may still answer given all the time.
        let mut retry_patiently = None;
        // Whether the cell is gone for good (no location, missing, corrupt).
        let mut own_gone = group.targets[seg.index].is_none();
        match &group.targets[seg.index] {
            Some(target) if self.client.suspects().is_suspect(&target.addr) => {
                tracing::debug!(datanode = %target.addr, block = %target.key, "skipping suspect datanode; reconstructing");
                retry_patiently = Some(target);
            }
            Some(target) => {
                match self
                    .read_block(target, seg.offset, seg.len, Patience::Deadline)
                    .await
                {
                    Ok(bytes) => return Ok(bytes),
                    Err(e @ (ClientError::Meta(_) | ClientError::Closed)) => return Err(e),
                    Err(e) => {
                        tracing::warn!(
                            datanode = %target.addr, block = %target.key, error = %e,
                            "EC cell read failed; reconstructing from the other cells"
                        );
                        if matches!(e, ClientError::Timeout { .. }) {
                            retry_patiently = Some(target);
                        }
                        own_gone = e.is_gone();
                    }
                }
            }
            None => tracing::warn!(
                block = %group.block, index = seg.index,
                "no location for EC internal block; reconstructing"
            ),
        }
        metrics::counter!(crate::telemetry::DEGRADED_READS.name).increment(1);
        match self.reconstruct(layout, codec, seg, own_gone).await {
            Ok(bytes) => Ok(bytes),
            Err(ClientError::Unavailable(why)) => match retry_patiently {
                // Too few other cells: the slow or suspect datanode is the last way.
                Some(target) => self
                    .read_block(target, seg.offset, seg.len, Patience::Full)
                    .await
                    .map_err(|e| {
                        ClientError::Unavailable(format!("{why}; cell {}: {e}", seg.index))
                    }),
                None => Err(ClientError::Unavailable(why)),
            },
            Err(e) => Err(e),
        }
    }

    /// One block read that must return exactly `len` bytes, within the read
    /// deadline unless `patience` is `Full`. A datanode that fails or misses
    /// the deadline is marked suspect; a bad checksum is reported to meta.
    async fn read_block(
        &self,
        target: &Target,
        offset: u64,
        len: u64,
        patience: Patience,
    ) -> Result<Bytes, ClientError> {
        self.check_open()?;
        let addr = target.addr.as_str();
        let read =
            self.client
                .pool()
                .read_block(addr, target.key, target.token.as_ref(), offset, len);
        let result = match patience {
            Patience::Full => read.await,
            Patience::Deadline => {
                match tokio::time::timeout(self.client.config().read_deadline, read).await {
                    Ok(result) => result,
                    Err(_elapsed) => Err(ClientError::Timeout {
                        addr: addr.to_string(),
                    }),
                }
            }
        };
        let result = result.and_then(|bytes| {
            if bytes.len() as u64 == len {
                Ok(bytes)
            } else {
                Err(ClientError::Protocol {
                    addr: addr.to_string(),
                    message: format!(
                        "{}: asked {len} bytes at {offset}, got {}",
                        target.key,
                        bytes.len()
                    ),
                })
            }
        });
        match &result {
            Err(
                ClientError::Io { .. } | ClientError::Timeout { .. } | ClientError::Protocol { .. },
            ) => self.client.suspects().mark(addr),
            Err(e) if e.is_gone() => self.report_bad_replica(target, e),
            _ => {}
        }
        result
    }

    /// Tells meta about a corrupt block file, in a task of its own so that
    /// the read (which goes on from other cells or replicas) does not wait.
    fn report_bad_replica(&self, target: &Target, error: &ClientError) {
        metrics::counter!(crate::telemetry::BAD_REPLICAS_REPORTED.name).increment(1);
        let meta = self.client.meta().clone();
        let (block, datanode) = (target.key, target.datanode.clone());
        let reason = format!("{error} (served by {})", target.addr);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            if let Err(e) = meta
                .call(meta_api::ReportBadReplica {
                    block,
                    datanode,
                    reason,
                })
                .await
            {
                tracing::warn!(%block, error = %e, "could not report a corrupt block file to meta");
            }
        });
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
