//! Repair of one damaged block group, run by the datanode meta chose (as
//! Ozone's ECReconstructionCoordinator runs on a datanode): read what is
//! readable, make the missing block files, write each to its target and
//! commit it there.
//!
//! An EC group is read stripe by stripe through a [`crate::KeyReader`] over
//! the group alone, which verifies every chunk's CRC32C and rebuilds missing
//! data cells from any `data` others; each stripe is then encoded again,
//! which gives every cell, parity included, with fresh checksums, and the
//! missing ones go to their targets (whose datanodes check those checksums
//! on arrival). A replicated block is read from any replica the same way.
//! A copy (decommission) reads the very block files from the datanode that
//! still holds them. Reads are paced by a [`Pacer`] shared by every repair
//! of the process.

use crate::stripe::Stripe;
use crate::{ClientError, Pacer, StoreClient};
use bytes::Bytes;
use meta_api::{ObjectRecord, RepairCommand, RepairSource, ReplicaLocation};
use proto::layout::{EcLayout, ReplicationConfig};
use proto::BlockKey;

/// Bytes read per step of a replicated block or a copy.
const PIECE: u64 = 1024 * 1024;

/// What a repair made.
#[derive(Debug, Default)]
pub struct RepairOutcome {
    /// Block files committed on their targets.
    pub made: Vec<ReplicaLocation>,
    /// Bytes read from the group's readable block files.
    pub bytes: u64,
    /// Why the repair stopped short, when it did.
    pub error: Option<ClientError>,
}

/// Runs `command`: makes every target's block file and commits it. On an
/// error the uncommitted uploads are dropped; `made` lists what was
/// committed before it (meta leaves those to the orphan detector).
pub async fn run_repair(
    client: &StoreClient,
    command: &RepairCommand,
    pacer: &Pacer,
) -> RepairOutcome {
    let mut outcome = RepairOutcome::default();
    let mut held = vec![0u64; command.targets.len()];
    let written = write_all(client, command, pacer, &mut held, &mut outcome.bytes).await;
    let committed = match written {
        Ok(()) => commit_all(client, command, &held, &mut outcome.made).await,
        Err(e) => Err(e),
    };
    if let Err(e) = committed {
        drop_uploads(client, command).await;
        outcome.error = Some(e);
    }
    outcome
}

/// Length of target `target`'s block file once whole.
fn expected_len(command: &RepairCommand, target: &ReplicaLocation) -> u64 {
    command
        .config
        .block_file_len(command.group.length, target.index as usize)
}

async fn write_all(
    client: &StoreClient,
    command: &RepairCommand,
    pacer: &Pacer,
    held: &mut [u64],
    read: &mut u64,
) -> Result<(), ClientError> {
    // A token that may delete: a target takes back its own index, where a
    // damaged file may still be committed. Nothing else of the group is
    // on the targets, so only that file goes.
    if command
        .write_token
        .is_some_and(|t| t.modes.allows(proto::token::Modes::DELETE))
    {
        drop_uploads(client, command).await;
    }
    match (&command.source, command.config) {
        (RepairSource::Rebuild, ReplicationConfig::Ec(layout)) => {
            rebuild_stripes(client, command, layout, pacer, held, read).await
        }
        (RepairSource::Rebuild, ReplicationConfig::Replicated { .. }) => {
            let reader = group_reader(client, command);
            let mut offset = 0;
            while offset < command.group.length {
                let len = PIECE.min(command.group.length - offset);
                pacer.take(len).await;
                let data = reader.read_at(offset, len as usize).await?;
                *read += len;
                send_to_targets(client, command, held, |_| Some((data.clone(), None))).await?;
                offset += len;
            }
            Ok(())
        }
        (RepairSource::Copy(from), _) => {
            copy_block_files(client, command, from, pacer, held, read).await
        }
    }
}

/// A reader over the command's group alone.
fn group_reader(client: &StoreClient, command: &RepairCommand) -> crate::KeyReader {
    let record = ObjectRecord::new("", "", "", command.config, vec![command.group.clone()]);
    client.reader(&record)
}

async fn rebuild_stripes(
    client: &StoreClient,
    command: &RepairCommand,
    layout: EcLayout,
    pacer: &Pacer,
    held: &mut [u64],
    read: &mut u64,
) -> Result<(), ClientError> {
    let codec = client
        .codecs()
        .get(layout.data as usize, layout.parity as usize)
        .map_err(|e| ClientError::Unavailable(format!("no codec for the group: {e}")))?;
    let bpc = client.config().bytes_per_checksum;
    let reader = group_reader(client, command);
    let length = command.group.length;
    for stripe in 0..layout.stripe_count(length) {
        let offset = stripe * layout.stripe_width();
        let len = layout.stripe_width().min(length - offset);
        pacer.take(len).await;
        let mut data = reader.read_at(offset, len as usize).await?;
        *read += len;
        let codec = codec.clone();
        let cells = tokio::task::spawn_blocking(move || {
            let mut stripe = Stripe::new(&layout, None);
            stripe.fill(&mut data);
            stripe.encode_with_checksums(&codec, bpc)
        })
        .await
        .map_err(|e| ClientError::Unavailable(format!("encoding failed: {e}")))?
        .map_err(|e| ClientError::Unavailable(format!("encoding failed: {e}")))?;
        send_to_targets(client, command, held, |target| {
            cells
                .iter()
                .find(|c| c.index == target.index as usize)
                .map(|c| (c.data.clone(), Some(c.crcs.clone())))
        })
        .await?;
    }
    Ok(())
}

/// Reads each target's block file from `from`, which still holds them all.
async fn copy_block_files(
    client: &StoreClient,
    command: &RepairCommand,
    from: &proto::DatanodeId,
    pacer: &Pacer,
    held: &mut [u64],
    read: &mut u64,
) -> Result<(), ClientError> {
    let source = command
        .group
        .replicas
        .iter()
        .find(|r| r.datanode == *from)
        .ok_or_else(|| {
            ClientError::Unavailable(format!("{from} holds no block file of the group"))
        })?;
    let token = command.group.token.as_ref();
    for (t, target) in command.targets.iter().enumerate() {
        let key = BlockKey::new(command.group.block, target.index);
        let total = expected_len(command, target);
        while held[t] < total {
            let len = PIECE.min(total - held[t]);
            pacer.take(len).await;
            let data = client
                .pool()
                .read_block(&source.addr, key, token, held[t], len)
                .await?;
            *read += len;
            write_piece(client, command, t, held, data, None).await?;
        }
    }
    Ok(())
}

/// Appends to each target the piece `piece_for` gives it (if any).
async fn send_to_targets(
    client: &StoreClient,
    command: &RepairCommand,
    held: &mut [u64],
    piece_for: impl Fn(&ReplicaLocation) -> Option<(Bytes, Option<Vec<u32>>)>,
) -> Result<(), ClientError> {
    for (t, target) in command.targets.iter().enumerate() {
        if let Some((data, crcs)) = piece_for(target) {
            write_piece(client, command, t, held, data, crcs).await?;
        }
    }
    Ok(())
}

async fn write_piece(
    client: &StoreClient,
    command: &RepairCommand,
    t: usize,
    held: &mut [u64],
    data: Bytes,
    crcs: Option<Vec<u32>>,
) -> Result<(), ClientError> {
    let target = &command.targets[t];
    let key = BlockKey::new(command.group.block, target.index);
    let token = command.write_token.as_ref();
    let pool = client.pool();
    let len = data.len() as u64;
    match crcs {
        Some(crcs) => {
            let bpc = client.config().bytes_per_checksum;
            pool.write_chunks_with_checksums(&target.addr, key, token, held[t], bpc, crcs, data)
                .await?
        }
        None => {
            pool.write_chunks(&target.addr, key, token, held[t], data)
                .await?
        }
    }
    held[t] += len;
    Ok(())
}

/// Commits every target at the length it must have, noting each in `made`.
async fn commit_all(
    client: &StoreClient,
    command: &RepairCommand,
    held: &[u64],
    made: &mut Vec<ReplicaLocation>,
) -> Result<(), ClientError> {
    for (target, held) in command.targets.iter().zip(held) {
        let expected = expected_len(command, target);
        if *held != expected {
            return Err(ClientError::Unavailable(format!(
                "made {held} bytes of block file {} where it holds {expected}",
                BlockKey::new(command.group.block, target.index)
            )));
        }
        client
            .pool()
            .commit_block(
                &target.addr,
                BlockKey::new(command.group.block, target.index),
                command.write_token.as_ref(),
                *held,
            )
            .await?;
        made.push(target.clone());
    }
    Ok(())
}

/// Best-effort removal of the targets' uncommitted uploads.
async fn drop_uploads(client: &StoreClient, command: &RepairCommand) {
    for target in &command.targets {
        let key = BlockKey::new(command.group.block, target.index);
        if let Err(e) = client
            .pool()
            .delete_block(&target.addr, key, command.write_token.as_ref())
            .await
        {
            tracing::debug!(%key, datanode = %target.addr, error = %e, "could not drop a repair upload");
        }
    }
}
