//! Degraded EC reads: rebuilding one cell's bytes from `data` other cells of
//! its stripe.

use super::{KeyReader, Patience, Segment};
use crate::client::ClientError;
use crate::codec::Codec;
use crate::layout::EcLayout;
use bytes::Bytes;
use futures::future::join_all;
use std::sync::Arc;

impl KeyReader {
    /// Rebuilds the bytes of `seg` from the same byte range of any `data`
    /// other cells of its stripe (RS codes each byte position on its own).
    /// Short cells count as zero-padded, as they were when encoded. Cells on
    /// suspect datanodes are asked last; each read has the read deadline.
    pub(super) async fn reconstruct(
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
        // Data cells first (in index order), then parity; suspects last.
        let suspects = self.client.suspects();
        sources.sort_by_key(|&(i, _)| {
            group.targets[i]
                .as_ref()
                .is_none_or(|t| suspects.is_suspect(&t.addr))
        });
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
                    Err(_) => {}
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
}
