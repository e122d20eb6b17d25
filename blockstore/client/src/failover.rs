//! The block groups of one key as its flush task fills them: allocation from
//! meta, sends to every target of the current group, commits, and failover.
//!
//! Failover follows Ozone's EC writer: when a target fails or stalls past the
//! I/O deadline while a stripe (or replicated piece) is sent, the group is
//! sealed at the last complete unit (its length ends there and the surviving
//! block files are committed), a new group is allocated excluding every
//! datanode that failed, and the same unit is sent again there. Readers need
//! nothing special: a group may hold any whole number of units.

use super::stripe::EncodedCell;
use super::{ClientError, StoreClient};
use bytes::Bytes;
use futures::future::join_all;
use futures::StreamExt;
use meta_api::{BlockGroup, MetaError};
use proto::ids::{BlockKey, DatanodeId};
use proto::layout::ReplicationConfig;
use proto::token::BlockToken;

/// Failovers one key may go through before its write fails (Ozone's
/// `ozone.client.max.ec.stripe.write.retries`).
pub(crate) const MAX_FAILOVERS: usize = 10;

/// Deletes issued at once when a write is thrown away.
const DISCARD_CONCURRENCY: usize = 16;

/// What one send carries to a group.
pub(crate) enum Unit {
    /// One EC stripe of `len` object bytes, its cells with their checksums.
    Stripe {
        /// Object bytes in the stripe's data cells.
        len: u64,
        /// Cells to send (empty cells of a partial stripe are left out).
        cells: Vec<EncodedCell>,
    },
    /// One replicated piece, the same bytes for every replica.
    Piece(Bytes),
}

impl Unit {
    /// Object bytes the unit carries.
    fn len(&self) -> u64 {
        match self {
            Self::Stripe { len, .. } => *len,
            Self::Piece(data) => data.len() as u64,
        }
    }
}

/// One block file of a group being written.
struct Target {
    key: BlockKey,
    addr: String,
    datanode: DatanodeId,
    /// Bytes its block file holds so far (the next write's offset).
    held: u64,
    /// Failed during this write, or never placed (`absent`): gets no more bytes.
    failed: bool,
    /// Meta placed no datanode for it (too few were healthy): the group was
    /// written short and meta rebuilds this block file after the commit.
    absent: bool,
}

/// A block group being written.
struct OpenGroup {
    /// As allocated, every replica listed; `length` counts the object bytes
    /// of the units every live target took.
    group: BlockGroup,
    /// EC: internal block `i` at position `i`. Replicated: every replica.
    targets: Vec<Target>,
}

impl OpenGroup {
    fn new(group: BlockGroup, replication: ReplicationConfig) -> Result<Self, ClientError> {
        let invalid = |why: String| {
            ClientError::Meta(MetaError::Protocol(format!(
                "block {} allocated for {replication}: {why}",
                group.block
            )))
        };
        let target = |key: BlockKey, r: &meta_api::ReplicaLocation| Target {
            key,
            addr: r.addr.clone(),
            datanode: r.datanode.clone(),
            held: 0,
            failed: false,
            absent: false,
        };
        let absent = |index: u8| Target {
            key: BlockKey::new(group.block, index),
            addr: String::new(),
            datanode: DatanodeId(String::new()),
            held: 0,
            failed: true,
            absent: true,
        };
        if group.replicas.len() < replication.min_width() {
            return Err(invalid(format!(
                "{} block files placed, {} needed",
                group.replicas.len(),
                replication.min_width()
            )));
        }
        let targets = match replication {
            ReplicationConfig::Ec(layout) => {
                let mut by_index: Vec<Option<Target>> = (0..layout.width()).map(|_| None).collect();
                for r in &group.replicas {
                    match by_index.get_mut(r.index as usize) {
                        Some(slot @ None) => {
                            *slot = Some(target(BlockKey::new(group.block, r.index), r))
                        }
                        _ => return Err(invalid(format!("unexpected internal block {}", r.index))),
                    }
                }
                by_index
                    .into_iter()
                    .enumerate()
                    .map(|(i, t)| t.unwrap_or_else(|| absent(i as u8)))
                    .collect()
            }
            ReplicationConfig::Replicated { replicas } => {
                if group.replicas.len() > replicas as usize {
                    return Err(invalid(format!("{} replicas", group.replicas.len())));
                }
                group
                    .replicas
                    .iter()
                    .map(|r| target(BlockKey::new(group.block, r.index), r))
                    .collect()
            }
        };
        let mut group = group;
        group.length = 0;
        Ok(Self { group, targets })
    }

    /// The group as readers get it: without the replicas that failed.
    fn into_record(self) -> BlockGroup {
        let failed: Vec<&DatanodeId> = self
            .targets
            .iter()
            .filter(|t| t.failed)
            .map(|t| &t.datanode)
            .collect();
        let mut group = self.group;
        group.replicas.retain(|r| !failed.contains(&&r.datanode));
        group
    }
}

/// The groups of one key, filled in order by its flush task.
pub(crate) struct GroupSink {
    client: StoreClient,
    replication: ReplicationConfig,
    /// Object bytes one group holds.
    capacity: u64,
    groups: Vec<OpenGroup>,
    /// `groups[..sealed]` are committed on their datanodes.
    sealed: usize,
    /// Object bytes sent to datanodes (in live groups).
    written: u64,
    /// Datanodes that failed during this key's write; new groups avoid them.
    exclude: Vec<DatanodeId>,
    failovers: usize,
}

impl GroupSink {
    pub(crate) fn new(client: StoreClient, replication: ReplicationConfig) -> Self {
        let capacity = replication
            .group_capacity(client.config().block_size)
            .max(1);
        Self {
            client,
            replication,
            capacity,
            groups: Vec::new(),
            sealed: 0,
            written: 0,
            exclude: Vec::new(),
            failovers: 0,
        }
    }

    /// Object bytes stored so far.
    pub(crate) fn written(&self) -> u64 {
        self.written
    }

    /// Sends `unit` to the current group (a new one when none is open), and
    /// fails over to a fresh group until it lands. A replicated piece longer
    /// than the room left in the group is split at the group's end.
    pub(crate) async fn send(&mut self, unit: Unit) -> Result<(), ClientError> {
        match unit {
            Unit::Piece(mut data) => {
                while !data.is_empty() {
                    let current = self.open_group().await?;
                    let room = self.capacity - self.groups[current].group.length;
                    let part = data.split_to((room as usize).min(data.len()));
                    self.send_whole(Unit::Piece(part)).await?;
                }
                Ok(())
            }
            stripe => self.send_whole(stripe).await,
        }
    }

    async fn send_whole(&mut self, unit: Unit) -> Result<(), ClientError> {
        loop {
            let current = self.open_group().await?;
            let failed = self.send_to_group(current, &unit).await;
            if failed.is_empty() {
                let len = unit.len();
                self.groups[current].group.length += len;
                self.written += len;
                if self.groups[current].group.length >= self.capacity {
                    self.seal_open_groups().await?;
                }
                return Ok(());
            }
            self.fail_over(current, failed).await?;
        }
    }

    /// Index of the open group, after allocating one (avoiding every
    /// datanode that failed during this write) when none is open.
    async fn open_group(&mut self) -> Result<usize, ClientError> {
        if self.sealed < self.groups.len() {
            return Ok(self.groups.len() - 1);
        }
        let group = self
            .client
            .meta()
            .call(meta_api::AllocateBlock {
                config: self.replication,
                exclude: self.exclude.clone(),
            })
            .await?;
        let open = OpenGroup::new(group, self.replication)?;
        tracing::debug!(block = %open.group.block, "allocated block group");
        self.groups.push(open);
        Ok(self.groups.len() - 1)
    }

    /// Sends `unit` to every live target of group `g` in parallel, waiting for
    /// all of them; returns the targets that failed, with why.
    async fn send_to_group(&mut self, g: usize, unit: &Unit) -> Vec<(usize, ClientError)> {
        let pool = self.client.pool().clone();
        let bpc = self.client.config().bytes_per_checksum;
        let open = &self.groups[g];
        let token = open.group.token.as_ref();
        let sends = open.targets.iter().enumerate().map(|(position, target)| {
            let pool = &pool;
            async move {
                let result = match unit {
                    _ if target.absent => Ok(0),
                    Unit::Stripe { cells, .. } => {
                        match cells.iter().find(|c| c.index == position) {
                            Some(cell) => pool
                                .write_chunks_with_checksums(
                                    &target.addr,
                                    target.key,
                                    token,
                                    target.held,
                                    bpc,
                                    cell.crcs.clone(),
                                    cell.data.clone(),
                                )
                                .await
                                .map(|()| cell.data.len() as u64),
                            None => Ok(0),
                        }
                    }
                    Unit::Piece(data) => pool
                        .write_chunks(&target.addr, target.key, token, target.held, data.clone())
                        .await
                        .map(|()| data.len() as u64),
                };
                (position, result)
            }
        });
        let results = join_all(sends).await;
        let open = &mut self.groups[g];
        let mut failed = Vec::new();
        for (position, result) in results {
            match result {
                Ok(sent) => open.targets[position].held += sent,
                Err(e) => failed.push((position, e)),
            }
        }
        failed
    }

    /// Group `g` lost `failed` while a unit was sent: excludes their
    /// datanodes, seals the group at its last complete unit (or drops it when
    /// it holds nothing yet), so the next send allocates a new group.
    async fn fail_over(
        &mut self,
        g: usize,
        failed: Vec<(usize, ClientError)>,
    ) -> Result<(), ClientError> {
        self.failovers += 1;
        metrics::counter!(crate::telemetry::WRITE_FAILOVERS.name).increment(1);
        let mut last_error = String::new();
        for (position, error) in failed {
            tracing::warn!(
                block = %self.groups[g].targets[position].key,
                datanode = %self.groups[g].targets[position].addr,
                %error,
                "write to datanode failed; moving to a new block group"
            );
            last_error = error.to_string();
            self.mark_failed(g, position);
        }
        if self.failovers > MAX_FAILOVERS {
            return Err(ClientError::Unavailable(format!(
                "gave up after {MAX_FAILOVERS} failovers, last: {last_error}"
            )));
        }
        self.forget_failed(g);
        if self.groups[g].group.length == 0 {
            // Nothing of the key is in it: throw the whole group away.
            let open = self.groups.remove(g);
            tokio::spawn(discard_groups(self.client.clone(), vec![open.group]));
            return Ok(());
        }
        self.seal_open_groups().await
    }

    fn mark_failed(&mut self, g: usize, position: usize) {
        let target = &mut self.groups[g].targets[position];
        target.failed = true;
        self.client.suspects().mark(&target.addr);
        if !self.exclude.contains(&target.datanode) {
            self.exclude.push(target.datanode.clone());
        }
    }

    /// Best-effort removal, in the background, of the uncommitted block files
    /// of group `g`'s failed targets (a datanode that only stalled would
    /// otherwise keep the upload open until it restarts).
    fn forget_failed(&self, g: usize) {
        let pool = self.client.pool().clone();
        let token = self.groups[g].group.token;
        let doomed: Vec<(BlockKey, String)> = self.groups[g]
            .targets
            .iter()
            .filter(|t| t.failed && !t.absent)
            .map(|t| (t.key, t.addr.clone()))
            .collect();
        tokio::spawn(async move {
            for (key, addr) in doomed {
                if let Err(e) = pool.delete_block(&addr, key, token.as_ref()).await {
                    tracing::debug!(%key, datanode = %addr, error = %e, "could not drop a failed upload");
                }
            }
        });
    }

    /// Commits every live block file of the groups not yet sealed at the
    /// length it holds, zero-length internal blocks included. A target whose
    /// commit fails is dropped from the group as long as enough remain to
    /// read it (`data` cells for EC, one replica when replicated).
    pub(crate) async fn seal_open_groups(&mut self) -> Result<(), ClientError> {
        let pool = self.client.pool().clone();
        for g in self.sealed..self.groups.len() {
            let open = &self.groups[g];
            let token = open.group.token.as_ref();
            let commits = open
                .targets
                .iter()
                .enumerate()
                .filter(|(_, t)| !t.failed)
                .map(|(position, t)| {
                    let pool = &pool;
                    async move {
                        let committed = pool.commit_block(&t.addr, t.key, token, t.held).await;
                        (position, committed)
                    }
                });
            for (position, result) in join_all(commits).await {
                if let Err(error) = result {
                    tracing::warn!(
                        block = %self.groups[g].targets[position].key,
                        %error,
                        "commit failed; the group keeps its other blocks"
                    );
                    self.mark_failed(g, position);
                }
            }
            let live = self.groups[g].targets.iter().filter(|t| !t.failed).count();
            let needed = match self.replication {
                ReplicationConfig::Ec(layout) => layout.data as usize,
                ReplicationConfig::Replicated { .. } => 1,
            };
            if live < needed {
                return Err(ClientError::Unavailable(format!(
                    "block {}: only {live} of its blocks committed, {needed} needed",
                    self.groups[g].group.block
                )));
            }
        }
        self.sealed = self.groups.len();
        Ok(())
    }

    /// The groups for the object record, without the replicas that failed.
    pub(crate) fn take_groups(&mut self) -> Vec<BlockGroup> {
        self.sealed = 0;
        self.written = 0;
        std::mem::take(&mut self.groups)
            .into_iter()
            .map(OpenGroup::into_record)
            .collect()
    }

    /// Every group as allocated (all replicas), for throwing the write away.
    pub(crate) fn take_all_groups(&mut self) -> Vec<BlockGroup> {
        self.sealed = 0;
        self.written = 0;
        std::mem::take(&mut self.groups)
            .into_iter()
            .map(|open| open.group)
            .collect()
    }
}

/// Best-effort removal of a key's block files, then of its groups in meta
/// (which retries deletions on datanodes that did not answer).
pub(crate) async fn discard_groups(client: StoreClient, groups: Vec<BlockGroup>) {
    if groups.is_empty() {
        return;
    }
    let pool = client.pool().clone();
    // A write token drops only what is still uncommitted; meta deletes the
    // rest once it has the groups.
    let mut block_files: Vec<(BlockKey, String, Option<BlockToken>)> = Vec::new();
    for group in &groups {
        for (key, replica) in group.block_keys() {
            block_files.push((key, replica.addr.clone(), group.token));
        }
    }
    futures::stream::iter(block_files)
        .for_each_concurrent(DISCARD_CONCURRENCY, |(key, addr, token)| {
            let pool = &pool;
            async move {
                if let Err(e) = pool.delete_block(&addr, key, token.as_ref()).await {
                    tracing::debug!(%key, datanode = %addr, error = %e, "discarding block failed");
                }
            }
        })
        .await;
    if let Err(e) = client.meta().call(meta_api::DiscardBlocks { groups }).await {
        tracing::warn!(error = %e, "could not hand discarded blocks to meta");
    }
}
