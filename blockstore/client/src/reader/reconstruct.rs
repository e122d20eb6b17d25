//! Degraded EC reads: rebuilding one cell's bytes from `data` other cells of
//! its stripe.

use super::{KeyReader, Patience, Segment};
use crate::ClientError;
use bytes::Bytes;
use codec::Codec;
use futures::future::join_all;
use proto::layout::EcLayout;
use std::sync::Arc;

/// Cells up to this long are rebuilt on the reading task itself.
const INLINE_DECODE_MAX: usize = 256 * 1024;

impl KeyReader {
    /// Rebuilds the bytes of `seg` from the same byte range of any `data`
    /// other cells of its stripe (RS codes each byte position on its own).
    /// Short cells count as zero-padded, as they were when encoded. Cells on
    /// suspect datanodes are asked last; each read has the read deadline.
    /// Fails with [`ClientError::Lost`] when so many cells are gone for good
    /// (`own_gone` says whether `seg`'s own is) that fewer than `data` are
    /// left anywhere, with `Unavailable` when some may come back.
    pub(super) async fn reconstruct(
        &self,
        layout: &EcLayout,
        codec: &Arc<Codec>,
        seg: Segment,
        own_gone: bool,
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
        // Data cells first (in index order), then parity; suspects last.
        let suspects = self.client.suspects();
        sources.sort_by_key(|&(i, _)| {
            group.targets[i]
                .as_ref()
                .is_none_or(|t| suspects.is_suspect(&t.addr))
        });
        let mut sources = sources.into_iter();
        let mut gone = usize::from(own_gone);
        while present < data {
            let batch: Vec<(usize, u64)> = sources.by_ref().take(data - present).collect();
            if batch.is_empty() {
                let why = format!(
                    "block {} stripe {}: only {present} of the {data} cells needed are readable",
                    group.block, seg.stripe
                );
                return Err(if layout.width() - gone < data {
                    ClientError::Lost(format!("{why}, {gone} are missing or corrupt"))
                } else {
                    ClientError::Unavailable(why)
                });
            }
            let reads = batch.iter().map(|&(i, wanted)| async move {
                let result = match &group.targets[i] {
                    Some(target) => self
                        .read_block(target, seg.offset, wanted, Patience::Deadline)
                        .await
                        .inspect_err(|e| {
                            tracing::warn!(datanode = %target.addr, block = %target.key, error = %e, "EC cell unreadable during reconstruction")
                        }),
                    None => Err(ClientError::Unavailable(format!("no location for cell {i}"))),
                };
                (i, result)
            });
            for (i, result) in join_all(reads).await {
                match result {
                    Ok(bytes) => {
                        // The codec works on owned, equally long cells.
                        let mut cell = Vec::with_capacity(n);
                        cell.extend_from_slice(&bytes);
                        cell.resize(n, 0);
                        self.count_copy(bytes.len());
                        cells[i] = Some(cell);
                        present += 1;
                    }
                    Err(ClientError::Closed) => return Err(ClientError::Closed),
                    // A cell with no location is as gone as a missing one.
                    Err(e) => gone += usize::from(e.is_gone() || group.targets[i].is_none()),
                }
            }
        }
        let codec = codec.clone();
        let index = seg.index;
        let mut decode = move || {
            codec
                .reconstruct_data(&mut cells)
                .map(|()| cells.swap_remove(index))
        };
        // A small range decodes in microseconds: less than a trip to the
        // blocking pool and back.
        let rebuilt = if n <= INLINE_DECODE_MAX {
            decode()
        } else {
            tokio::task::spawn_blocking(decode)
                .await
                .map_err(|e| ClientError::Unavailable(format!("reconstruction task: {e}")))?
        }
        .map_err(|e| ClientError::Unavailable(format!("block {}: {e}", group.block)))?;
        rebuilt.map(Bytes::from).ok_or_else(|| {
            ClientError::Unavailable(format!("block {}: cell {index} not rebuilt", group.block))
        })
    }
}

impl KeyReader {
    /// Whether `seg`'s own cell is known to be unreadable now (no location,
    /// or its datanode failed recently), so the read goes straight to
    /// reconstruction.
    pub(super) fn cell_unavailable(&self, seg: &Segment) -> bool {
        self.groups[seg.group].targets[seg.index]
            .as_ref()
            .is_none_or(|t| self.client.suspects().is_suspect(&t.addr))
    }

    /// One stripe row of a read (its segments: the same stripe, the same
    /// in-cell range) with cells on unavailable datanodes: the readable
    /// cells of the row are read once, with just enough others (parity) to
    /// rebuild the missing ones, so a stripe costs `data` cell reads rather
    /// than `data` per missing cell on top of the row's own. None when the
    /// row does not fit that shape, nothing is missing, or a read failed:
    /// the caller then reads segment by segment, which handles all of it.
    pub(super) async fn read_row_degraded(
        &self,
        layout: &EcLayout,
        codec: &Arc<Codec>,
        row: &[Segment],
    ) -> Option<Result<Vec<Bytes>, ClientError>> {
        let first = *row.first()?;
        if row
            .iter()
            .any(|s| s.group != first.group || s.offset != first.offset || s.len != first.len)
        {
            return None;
        }
        let missing: Vec<usize> = row
            .iter()
            .filter(|s| self.cell_unavailable(s))
            .map(|s| s.index)
            .collect();
        if missing.is_empty() {
            return None;
        }
        let group = &self.groups[first.group];
        let data = layout.data as usize;
        let n = first.len as usize;
        let in_cell = first.offset - first.stripe * layout.cell_size as u64;
        let in_row = |i: usize| row.iter().any(|s| s.index == i);
        let mut cells: Vec<Option<Vec<u8>>> = vec![None; layout.width()];
        let mut present = 0;
        let mut sources = Vec::new();
        for (i, cell) in cells.iter_mut().enumerate() {
            if missing.contains(&i) {
                continue;
            }
            let cell_len = layout.cell_len(group.len, first.stripe, if i < data { i } else { 0 });
            let wanted = cell_len.saturating_sub(in_cell).min(first.len);
            if wanted == 0 {
                *cell = Some(vec![0; n]);
                present += 1;
            } else if group.targets[i]
                .as_ref()
                .is_some_and(|t| !self.client.suspects().is_suspect(&t.addr))
            {
                sources.push((i, wanted));
            }
        }
        // The row's own cells first (they are wanted anyway), then other
        // data cells, then parity.
        sources.sort_by_key(|&(i, _)| (!in_row(i), i >= data));
        let own = sources.iter().filter(|&&(i, _)| in_row(i)).count();
        let take = own.max(data.saturating_sub(present));
        if sources.len() < take || present + take < data {
            return None;
        }
        sources.truncate(take);
        let reads = sources.iter().map(|&(i, wanted)| async move {
            let target = group.targets[i].as_ref().expect("sources have locations");
            let read = self
                .read_block(target, first.offset, wanted, Patience::Deadline)
                .await;
            (i, read)
        });
        let mut kept: Vec<(usize, Bytes)> = Vec::with_capacity(sources.len());
        for (i, read) in join_all(reads).await {
            match read {
                Ok(bytes) => kept.push((i, bytes)),
                Err(ClientError::Closed) => return Some(Err(ClientError::Closed)),
                Err(_) => return None,
            }
        }
        for (i, bytes) in &kept {
            let mut cell = Vec::with_capacity(n);
            cell.extend_from_slice(bytes);
            cell.resize(n, 0);
            self.count_copy(bytes.len());
            cells[*i] = Some(cell);
        }
        metrics::counter!(crate::telemetry::DEGRADED_READS.name).increment(missing.len() as u64);
        let codec = codec.clone();
        let rebuilt =
            tokio::task::spawn_blocking(move || codec.reconstruct_data(&mut cells).map(|()| cells))
                .await;
        let mut cells = match rebuilt {
            Ok(Ok(cells)) => cells,
            Ok(Err(e)) => {
                return Some(Err(ClientError::Unavailable(format!(
                    "block {}: {e}",
                    group.block
                ))))
            }
            Err(e) => {
                return Some(Err(ClientError::Unavailable(format!(
                    "reconstruction task: {e}"
                ))))
            }
        };
        let mut out = Vec::with_capacity(row.len());
        for seg in row {
            let piece = match kept.iter().find(|(i, _)| *i == seg.index) {
                Some((_, bytes)) => bytes.clone(),
                None => match cells[seg.index].take() {
                    Some(cell) => Bytes::from(cell),
                    None => {
                        return Some(Err(ClientError::Unavailable(format!(
                            "block {}: cell {} not rebuilt",
                            group.block, seg.index
                        ))))
                    }
                },
            };
            out.push(piece);
        }
        Some(Ok(out))
    }
}
