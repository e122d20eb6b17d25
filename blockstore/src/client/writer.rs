//! The key writer: cuts an object's bytes into EC stripes (or replicated
//! pieces), sends them to the datanodes of block groups allocated from meta,
//! and commits every block file when the key is finished.
//!
//! EC follows Ozone: data cells fill round robin, a full stripe is encoded and
//! its d + p cells go to their d + p datanodes in parallel; a partial last
//! stripe sends data cells at their real length and parity as long as cell 0.

use super::{ClientError, StoreClient};
use crate::codec::{Codec, CodecError};
use crate::ids::BlockKey;
use crate::layout::{EcLayout, ReplicationConfig};
use crate::meta::{BlockGroup, MetaError};
use bytes::{Buf, Bytes, BytesMut};
use futures::future::try_join_all;
use futures::StreamExt;
use std::sync::Arc;

/// Largest piece a replicated writer sends in one request.
const REPLICATED_PIECE: u64 = 1024 * 1024;

/// Deletes issued at once when a write is thrown away.
const DISCARD_CONCURRENCY: usize = 16;

/// What a finished writer stored: durable on datanodes, not yet visible.
#[derive(Clone, Debug)]
pub struct WrittenKey {
    /// Bytes written.
    pub size: u64,
    /// How the bytes are protected.
    pub replication: ReplicationConfig,
    /// The block groups holding the bytes, in order.
    pub groups: Vec<BlockGroup>,
}

/// Writes one key's bytes into block groups.
pub struct KeyWriter {
    sink: GroupSink,
    pending: Pending,
    state: WriterState,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WriterState {
    /// Accepting data.
    Open,
    /// A call failed or was cancelled midway; only abort or drop remain.
    Broken,
    /// Finished or aborted: the blocks are no longer this writer's to clean up.
    Done,
}

/// Bytes accepted but not yet sent to datanodes.
enum Pending {
    Ec(EcPending),
    Replicated(PiecePending),
    /// The replication config cannot be written (bad shape).
    Invalid(String),
}

impl KeyWriter {
    pub(crate) fn new(client: StoreClient, replication: ReplicationConfig) -> Self {
        let capacity = replication.group_capacity(client.config().block_size);
        let pending = match replication {
            ReplicationConfig::Ec(layout)
                if !layout
                    .cell_size
                    .is_multiple_of(client.config().bytes_per_checksum.max(1)) =>
            {
                // Stripes start at multiples of the cell size, and writes must
                // start on a checksum chunk.
                Pending::Invalid(format!(
                    "replication {replication}: cell size is not a multiple of {} checksum bytes",
                    client.config().bytes_per_checksum
                ))
            }
            ReplicationConfig::Ec(layout) => match EcPending::new(layout) {
                Ok(ec) => Pending::Ec(ec),
                Err(e) => Pending::Invalid(format!("replication {replication}: {e}")),
            },
            ReplicationConfig::Replicated { replicas: 0 } => {
                Pending::Invalid(format!("replication {replication}: no replicas"))
            }
            ReplicationConfig::Replicated { .. } => {
                let bpc = u64::from(client.config().bytes_per_checksum.max(1));
                // Pieces start at multiples of the piece size, so keep it chunk-aligned.
                let piece = ((REPLICATED_PIECE / bpc).max(1) * bpc) as usize;
                Pending::Replicated(PiecePending {
                    buf: BytesMut::new(),
                    piece,
                })
            }
        };
        Self {
            sink: GroupSink {
                client,
                replication,
                capacity: capacity.max(1),
                groups: Vec::new(),
                sealed: 0,
                written: 0,
            },
            pending,
            state: WriterState::Open,
        }
    }

    /// Appends `data` to the key.
    pub async fn write(&mut self, data: Bytes) -> Result<(), ClientError> {
        self.check_open()?;
        // Broken until the call completes, so a cancelled call leaves no half state.
        self.state = WriterState::Broken;
        let len = data.len();
        self.write_inner(data).await?;
        metrics::counter!("tessera_client_write_bytes_total").increment(len as u64);
        self.state = WriterState::Open;
        Ok(())
    }

    /// Flushes the last stripe, commits every block file durably on its
    /// datanodes, and returns the groups for the caller to commit in meta.
    pub async fn finish(mut self) -> Result<WrittenKey, ClientError> {
        self.check_open()?;
        self.state = WriterState::Broken;
        match self.finish_inner().await {
            Ok(key) => {
                self.state = WriterState::Done;
                Ok(key)
            }
            Err(e) => {
                self.state = WriterState::Done;
                discard_groups(self.sink.client.clone(), self.sink.take_groups()).await;
                Err(e)
            }
        }
    }

    /// Gives up: deletes what was written (best effort; meta's cleaner gets the rest).
    pub async fn abort(mut self) {
        self.state = WriterState::Done;
        discard_groups(self.sink.client.clone(), self.sink.take_groups()).await;
    }

    /// Bytes accepted so far.
    pub fn len(&self) -> u64 {
        self.sink.written + self.pending.len() as u64
    }

    /// True before any byte was written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn check_open(&self) -> Result<(), ClientError> {
        if let Pending::Invalid(reason) = &self.pending {
            return Err(MetaError::InvalidRequest(reason.clone()).into());
        }
        match self.state {
            WriterState::Open => Ok(()),
            _ => Err(ClientError::Closed),
        }
    }

    async fn write_inner(&mut self, mut data: Bytes) -> Result<(), ClientError> {
        while !data.is_empty() {
            match &mut self.pending {
                Pending::Ec(ec) => {
                    ec.stripe.fill(&mut data);
                    if ec.stripe.is_full() {
                        ec.flush(&mut self.sink).await?;
                    }
                }
                Pending::Replicated(rep) => {
                    let target = rep.piece.min(self.sink.room_in_group() as usize);
                    if rep.buf.is_empty() && data.len() >= target {
                        // Whole pieces of the caller's buffer go out without a copy.
                        let piece = data.split_to(target);
                        self.sink.send_piece(piece).await?;
                    } else {
                        if rep.buf.is_empty() {
                            // Reclaims the previous piece's buffer once it was sent.
                            rep.buf.reserve(target);
                        }
                        let take = (target - rep.buf.len()).min(data.len());
                        rep.buf.extend_from_slice(&data[..take]);
                        data.advance(take);
                        if rep.buf.len() == target {
                            let piece = rep.buf.split().freeze();
                            self.sink.send_piece(piece).await?;
                        }
                    }
                }
                Pending::Invalid(reason) => {
                    return Err(MetaError::InvalidRequest(reason.clone()).into())
                }
            }
        }
        Ok(())
    }

    async fn finish_inner(&mut self) -> Result<WrittenKey, ClientError> {
        match &mut self.pending {
            Pending::Ec(ec) => ec.flush(&mut self.sink).await?,
            Pending::Replicated(rep) => {
                if !rep.buf.is_empty() {
                    let piece = rep.buf.split().freeze();
                    self.sink.send_piece(piece).await?;
                }
            }
            Pending::Invalid(reason) => {
                return Err(MetaError::InvalidRequest(reason.clone()).into())
            }
        }
        self.sink.seal_open_groups().await?;
        Ok(WrittenKey {
            size: self.sink.written,
            replication: self.sink.replication,
            groups: self.sink.take_groups(),
        })
    }
}

impl Drop for KeyWriter {
    fn drop(&mut self) {
        if self.state == WriterState::Done || self.sink.groups.is_empty() {
            return;
        }
        let groups = self.sink.take_groups();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(discard_groups(self.sink.client.clone(), groups));
            }
            Err(_) => tracing::warn!(
                groups = groups.len(),
                "key writer dropped outside a runtime; its blocks stay until meta reclaims them"
            ),
        }
    }
}

impl Pending {
    fn len(&self) -> usize {
        match self {
            Self::Ec(ec) => ec.stripe.len(),
            Self::Replicated(rep) => rep.buf.len(),
            Self::Invalid(_) => 0,
        }
    }
}

/// A block group being written, with the block file each of its targets holds.
struct OpenGroup {
    /// `length` counts the object bytes sent to this group so far.
    group: BlockGroup,
    /// EC: internal block `i` at position `i`. Replicated: every replica.
    targets: Vec<(BlockKey, String)>,
}

impl OpenGroup {
    fn new(group: BlockGroup, replication: ReplicationConfig) -> Result<Self, ClientError> {
        let invalid = |why: String| {
            ClientError::Meta(MetaError::Protocol(format!(
                "block {} allocated for {replication}: {why}",
                group.block
            )))
        };
        let targets = match replication {
            ReplicationConfig::Ec(layout) => {
                let mut by_index: Vec<Option<String>> = vec![None; layout.width()];
                for r in &group.replicas {
                    match by_index.get_mut(r.index as usize) {
                        Some(slot @ None) => *slot = Some(r.addr.clone()),
                        _ => return Err(invalid(format!("unexpected internal block {}", r.index))),
                    }
                }
                by_index
                    .into_iter()
                    .enumerate()
                    .map(|(i, addr)| {
                        let addr = addr.ok_or_else(|| invalid(format!("no internal block {i}")))?;
                        Ok((BlockKey::new(group.block, i as u8), addr))
                    })
                    .collect::<Result<Vec<_>, ClientError>>()?
            }
            ReplicationConfig::Replicated { replicas } => {
                if group.replicas.len() != replicas as usize {
                    return Err(invalid(format!("{} replicas", group.replicas.len())));
                }
                group
                    .replicas
                    .iter()
                    .map(|r| (BlockKey::new(group.block, r.index), r.addr.clone()))
                    .collect()
            }
        };
        let mut group = group;
        group.length = 0;
        Ok(Self { group, targets })
    }

    /// Length of the block file of target `position` once the group is complete.
    fn block_len(&self, replication: ReplicationConfig, position: usize) -> u64 {
        match replication {
            ReplicationConfig::Ec(layout) => layout.internal_block_len(self.group.length, position),
            ReplicationConfig::Replicated { .. } => self.group.length,
        }
    }
}

/// The groups of one key: allocates them lazily, fills them in order, and
/// commits (seals) each one when it is full or the key is finished.
struct GroupSink {
    client: StoreClient,
    replication: ReplicationConfig,
    /// Object bytes one group holds.
    capacity: u64,
    groups: Vec<OpenGroup>,
    /// `groups[..sealed]` are committed on their datanodes.
    sealed: usize,
    /// Object bytes sent to datanodes.
    written: u64,
}

impl GroupSink {
    /// Bytes the group receiving the next byte can still take.
    fn room_in_group(&self) -> u64 {
        self.capacity - self.written % self.capacity
    }

    /// Index of the group the next bytes go to: a full group is sealed first
    /// and a new one allocated. Callers never send more than `room_in_group()` at once.
    async fn current_group(&mut self) -> Result<usize, ClientError> {
        if self.groups.is_empty() || self.room_in_group() == self.capacity {
            self.seal_open_groups().await?;
            let group = self
                .client
                .meta()
                .allocate_block(self.replication, vec![])
                .await?;
            let open = OpenGroup::new(group, self.replication)?;
            tracing::debug!(block = %open.group.block, "allocated block group");
            self.groups.push(open);
        }
        Ok(self.groups.len() - 1)
    }

    /// Counts `len` bytes as sent to the current group.
    fn record(&mut self, len: usize) {
        if let Some(open) = self.groups.last_mut() {
            open.group.length += len as u64;
        }
        self.written += len as u64;
    }

    /// Sends one replicated piece to every replica of the current group.
    async fn send_piece(&mut self, piece: Bytes) -> Result<(), ClientError> {
        let current = self.current_group().await?;
        let open = &self.groups[current];
        let pool = self.client.pool();
        let offset = open.group.length;
        try_join_all(
            open.targets
                .iter()
                .map(|(key, addr)| pool.write_chunks(addr, *key, offset, piece.clone())),
        )
        .await?;
        self.record(piece.len());
        Ok(())
    }

    /// Commits every block file of the groups not yet sealed, zero-length
    /// internal blocks included, so that every block of a group exists.
    async fn seal_open_groups(&mut self) -> Result<(), ClientError> {
        let pool = self.client.pool().clone();
        let replication = self.replication;
        let commits = self.groups[self.sealed..].iter().flat_map(|open| {
            let pool = &pool;
            open.targets
                .iter()
                .enumerate()
                .map(move |(i, (key, addr))| {
                    pool.commit_block(addr, *key, open.block_len(replication, i))
                })
        });
        try_join_all(commits).await?;
        self.sealed = self.groups.len();
        Ok(())
    }

    fn take_groups(&mut self) -> Vec<BlockGroup> {
        self.sealed = 0;
        std::mem::take(&mut self.groups)
            .into_iter()
            .map(|open| open.group)
            .collect()
    }
}

/// Best-effort removal of a key's block files, then of its groups in meta
/// (which retries deletions on datanodes that did not answer).
async fn discard_groups(client: StoreClient, groups: Vec<BlockGroup>) {
    if groups.is_empty() {
        return;
    }
    let pool = client.pool().clone();
    futures::stream::iter(groups.iter().flat_map(|g| g.block_keys()))
        .for_each_concurrent(DISCARD_CONCURRENCY, |(key, replica)| {
            let pool = &pool;
            async move {
                if let Err(e) = pool.delete_block(&replica.addr, key).await {
                    tracing::debug!(%key, datanode = %replica.addr, error = %e, "discarding block failed");
                }
            }
        })
        .await;
    if let Err(e) = client.meta().discard_blocks(groups).await {
        tracing::warn!(error = %e, "could not hand discarded blocks to meta");
    }
}

/// The replicated side of the writer: bytes gathered into one piece.
struct PiecePending {
    buf: BytesMut,
    /// Largest piece sent at once (chunk-aligned).
    piece: usize,
}

/// The EC side of the writer: the stripe being filled and the codec.
struct EcPending {
    layout: EcLayout,
    codec: Arc<Codec>,
    /// A placeholder only while the stripe is encoded on the blocking pool.
    stripe: Stripe,
}

impl EcPending {
    fn new(layout: EcLayout) -> Result<Self, CodecError> {
        if layout.cell_size == 0 {
            return Err(CodecError::Unsupported {
                data: layout.data as usize,
                parity: layout.parity as usize,
            });
        }
        let codec = Codec::get(layout.data as usize, layout.parity as usize)?;
        Ok(Self {
            layout,
            codec,
            stripe: Stripe::new(&layout),
        })
    }

    /// Encodes the buffered stripe (full, or the partial last one) and sends
    /// its cells to the current group's datanodes in parallel.
    async fn flush(&mut self, sink: &mut GroupSink) -> Result<(), ClientError> {
        let len = self.stripe.len();
        if len == 0 {
            return Ok(());
        }
        let open = sink.current_group().await?;
        let open = &sink.groups[open];
        let offset = open.group.length / self.layout.stripe_width() * self.layout.cell_size as u64;
        let codec = self.codec.clone();
        let mut stripe = std::mem::replace(&mut self.stripe, Stripe::placeholder());
        let (stripe, cells) = tokio::task::spawn_blocking(move || {
            let cells = stripe.encode(&codec);
            (stripe, cells)
        })
        .await
        .map_err(|e| ClientError::Unavailable(format!("stripe encoder task: {e}")))?;
        self.stripe = stripe;
        let cells = cells.map_err(|e| ClientError::Unavailable(format!("encoding stripe: {e}")))?;
        let pool = sink.client.pool();
        let writes = cells.into_iter().map(|(index, cell)| {
            let (key, addr) = &open.targets[index];
            pool.write_chunks(addr, *key, offset, cell)
        });
        try_join_all(writes).await?;
        sink.record(len);
        self.stripe.reset();
        metrics::counter!("tessera_client_stripes_written_total").increment(1);
        Ok(())
    }
}

/// The cell buffers of one EC stripe: `data` data cells filled in order, then
/// `parity` parity cells computed from them. Reset and reused for every
/// stripe of a key (the unit a per-stream free list will hand out).
pub(crate) struct Stripe {
    data: usize,
    cell_size: usize,
    /// Data cells, then parity cells.
    cells: Vec<BytesMut>,
    /// Object bytes in the data cells.
    len: usize,
}

impl Stripe {
    /// Empty buffers for one stripe of `layout`.
    pub(crate) fn new(layout: &EcLayout) -> Self {
        let cell_size = layout.cell_size as usize;
        Self {
            data: layout.data as usize,
            cell_size,
            cells: (0..layout.width())
                .map(|_| BytesMut::with_capacity(cell_size))
                .collect(),
            len: 0,
        }
    }

    /// Stands in while the real stripe is on the blocking pool.
    fn placeholder() -> Self {
        Self {
            data: 0,
            cell_size: 0,
            cells: Vec::new(),
            len: 0,
        }
    }

    /// Object bytes buffered.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// True when every data cell is full.
    pub(crate) fn is_full(&self) -> bool {
        self.len == self.data * self.cell_size
    }

    /// Moves bytes from the front of `src` into the data cells, cell 0 first,
    /// until the stripe is full or `src` is empty.
    pub(crate) fn fill(&mut self, src: &mut Bytes) {
        while !src.is_empty() && !self.is_full() {
            let cell = &mut self.cells[self.len / self.cell_size];
            let take = (self.cell_size - cell.len()).min(src.len());
            cell.extend_from_slice(&src[..take]);
            src.advance(take);
            self.len += take;
        }
    }

    /// Real length of data cell `index`.
    fn data_cell_len(&self, index: usize) -> usize {
        self.len
            .saturating_sub(index * self.cell_size)
            .min(self.cell_size)
    }

    /// Computes parity over the data cells zero-padded to the length of cell 0
    /// and hands out the cells to send, by internal block index: data cells at
    /// their real length (empty ones left out), parity at cell 0's length.
    /// The buffers are left empty until `reset`.
    pub(crate) fn encode(&mut self, codec: &Codec) -> Result<Vec<(usize, Bytes)>, CodecError> {
        let coded = self.data_cell_len(0);
        for cell in &mut self.cells {
            // Writes real zeros: a reused buffer may hold an older stripe's bytes.
            cell.resize(coded, 0);
        }
        let (data, parity) = self.cells.split_at_mut(self.data);
        codec.encode(data, parity)?;
        let mut out = Vec::with_capacity(self.cells.len());
        for index in 0..self.cells.len() {
            let real = if index < self.data {
                self.data_cell_len(index)
            } else {
                coded
            };
            let cell = self.cells[index].split().freeze();
            if real > 0 {
                out.push((index, cell.slice(..real)));
            }
        }
        Ok(out)
    }

    /// Empties the stripe for the next one, reclaiming the cell buffers once
    /// the bytes handed out by `encode` are dropped.
    pub(crate) fn reset(&mut self) {
        for cell in &mut self.cells {
            cell.clear();
            cell.reserve(self.cell_size);
        }
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAYOUT: EcLayout = EcLayout {
        data: 3,
        parity: 2,
        cell_size: 8,
    };

    fn fill(stripe: &mut Stripe, bytes: &[u8]) -> Bytes {
        let mut src = Bytes::copy_from_slice(bytes);
        stripe.fill(&mut src);
        src
    }

    fn client(dir: &tempfile::TempDir) -> StoreClient {
        let meta =
            crate::meta::MetaService::open(crate::meta::MetaConfig::new(dir.path())).unwrap();
        StoreClient::new(crate::meta::MetaClient::Local(meta), Default::default())
    }

    #[tokio::test]
    async fn empty_key_finishes_without_groups() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = client(&dir).writer(ReplicationConfig::RS_3_2);
        writer.write(Bytes::new()).await.unwrap();
        assert!(writer.is_empty());
        let key = writer.finish().await.unwrap();
        assert_eq!(key.size, 0);
        assert!(key.groups.is_empty());
    }

    #[tokio::test]
    async fn cells_off_checksum_chunks_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let layout = EcLayout {
            data: 3,
            parity: 2,
            cell_size: 1000,
        };
        let mut writer = client(&dir).writer(ReplicationConfig::Ec(layout));
        let err = writer.write(Bytes::from_static(b"x")).await.unwrap_err();
        assert!(
            matches!(err, ClientError::Meta(MetaError::InvalidRequest(_))),
            "{err:?}"
        );
    }

    #[test]
    fn fill_stops_at_a_full_stripe() {
        let mut stripe = Stripe::new(&LAYOUT);
        let all: Vec<u8> = (0..30).collect();
        let rest = fill(&mut stripe, &all);
        assert!(stripe.is_full());
        assert_eq!(stripe.len(), 24);
        assert_eq!(&rest[..], &all[24..]);
        let codec = Codec::get(3, 2).unwrap();
        let cells = stripe.encode(&codec).unwrap();
        let data: Vec<&[u8]> = cells.iter().take(3).map(|(_, c)| &c[..]).collect();
        assert_eq!(data, vec![&all[0..8], &all[8..16], &all[16..24]]);
        assert_eq!(
            cells.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 4]
        );
    }

    #[test]
    fn partial_stripe_pads_with_zeros_after_reuse() {
        let codec = Codec::get(3, 2).unwrap();
        let mut stripe = Stripe::new(&LAYOUT);
        fill(&mut stripe, &[0xff; 24]);
        drop(stripe.encode(&codec).unwrap());
        stripe.reset();
        assert_eq!(stripe.len(), 0);

        fill(&mut stripe, &[7u8; 11]);
        let cells = stripe.encode(&codec).unwrap();
        let lens: Vec<(usize, usize)> = cells.iter().map(|(i, c)| (*i, c.len())).collect();
        // Cell 2 is empty and not sent; parity is as long as cell 0.
        assert_eq!(lens, vec![(0, 8), (1, 3), (3, 8), (4, 8)]);
        let mut expected = vec![vec![0u8; 8]; 2];
        let padded = [
            vec![7u8; 8],
            [vec![7u8; 3], vec![0u8; 5]].concat(),
            vec![0u8; 8],
        ];
        codec.encode(&padded, &mut expected).unwrap();
        assert_eq!(&cells[2].1[..], &expected[0][..]);
        assert_eq!(&cells[3].1[..], &expected[1][..]);
    }

    #[test]
    fn short_first_cell_sets_parity_length() {
        let codec = Codec::get(3, 2).unwrap();
        let mut stripe = Stripe::new(&LAYOUT);
        fill(&mut stripe, &[1, 2, 3]);
        let cells = stripe.encode(&codec).unwrap();
        let lens: Vec<(usize, usize)> = cells.iter().map(|(i, c)| (*i, c.len())).collect();
        assert_eq!(lens, vec![(0, 3), (3, 3), (4, 3)]);
    }

    #[test]
    fn reset_reuses_the_cell_buffers() {
        let codec = Codec::get(3, 2).unwrap();
        let mut stripe = Stripe::new(&LAYOUT);
        fill(&mut stripe, &[5u8; 24]);
        let first = stripe.encode(&codec).unwrap();
        let ptr = first[0].1.as_ptr();
        drop(first);
        stripe.reset();
        fill(&mut stripe, &[6u8; 24]);
        let second = stripe.encode(&codec).unwrap();
        assert_eq!(second[0].1.as_ptr(), ptr);
        assert_eq!(&second[0].1[..], &[6u8; 8]);
    }
}
