//! One EC stripe's cell buffers: filled by the writer, encoded (parity and
//! CRC32C chunk checksums) off the executor, sent, then reset and reused for
//! a later stripe of the same stream.

use crate::buffer_pool::PoolLease;
use bytes::{Buf, Bytes, BytesMut};
use codec::{Codec, CodecError};
use proto::checksum;
use proto::layout::EcLayout;

/// The cell buffers of one EC stripe: `data` data cells filled in order, then
/// `parity` parity cells computed from them. A stream's free list hands the
/// same sets out again and again, reset in between.
pub(crate) struct Stripe {
    data: usize,
    cell_size: usize,
    /// Data cells, then parity cells.
    cells: Vec<BytesMut>,
    /// Object bytes in the data cells.
    len: usize,
    /// The room this set holds in the client's buffer pool, freed on drop.
    _lease: Option<PoolLease>,
}

/// One cell ready to send: its internal block index, bytes and checksums.
pub(crate) struct EncodedCell {
    /// Internal block index (data cells first, then parity).
    pub(crate) index: usize,
    /// The cell's bytes: data cells at their real length, parity as long as cell 0.
    pub(crate) data: Bytes,
    /// CRC32C of each checksum chunk of `data`.
    pub(crate) crcs: Vec<u32>,
}

impl Stripe {
    /// Empty buffers for one stripe of `layout`, holding `lease` while alive.
    pub(crate) fn new(layout: &EcLayout, lease: Option<PoolLease>) -> Self {
        let cell_size = layout.cell_size as usize;
        Self {
            data: layout.data as usize,
            cell_size,
            cells: (0..layout.width())
                .map(|_| BytesMut::with_capacity(cell_size))
                .collect(),
            len: 0,
            _lease: lease,
        }
    }

    /// A stripe of `layout` in buffers an ended stream left (`cells`, one
    /// per data and parity cell), emptied first.
    pub(crate) fn with_cells(
        layout: &EcLayout,
        cells: Vec<BytesMut>,
        lease: Option<PoolLease>,
    ) -> Self {
        let mut stripe = Self {
            data: layout.data as usize,
            cell_size: layout.cell_size as usize,
            cells,
            len: 0,
            _lease: lease,
        };
        stripe.reset();
        stripe
    }

    /// The cell buffers, for a later stripe; the pool room goes back now.
    pub(crate) fn into_cells(self) -> Vec<BytesMut> {
        self.cells
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

    /// [`encode`](Self::encode), then the CRC32C of every `bytes_per_checksum`
    /// chunk of each cell, all in one go (callers run it on the blocking pool).
    pub(crate) fn encode_with_checksums(
        &mut self,
        codec: &Codec,
        bytes_per_checksum: u32,
    ) -> Result<Vec<EncodedCell>, CodecError> {
        Ok(self
            .encode(codec)?
            .into_iter()
            .map(|(index, data)| EncodedCell {
                index,
                crcs: checksum::compute(&data, bytes_per_checksum),
                data,
            })
            .collect())
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

    #[test]
    fn fill_stops_at_a_full_stripe() {
        let mut stripe = Stripe::new(&LAYOUT, None);
        let all: Vec<u8> = (0..30).collect();
        let rest = fill(&mut stripe, &all);
        assert!(stripe.is_full());
        assert_eq!(stripe.len(), 24);
        assert_eq!(&rest[..], &all[24..]);
        let codec = Codec::new(3, 2).unwrap();
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
        let codec = Codec::new(3, 2).unwrap();
        let mut stripe = Stripe::new(&LAYOUT, None);
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
        let codec = Codec::new(3, 2).unwrap();
        let mut stripe = Stripe::new(&LAYOUT, None);
        fill(&mut stripe, &[1, 2, 3]);
        let cells = stripe.encode(&codec).unwrap();
        let lens: Vec<(usize, usize)> = cells.iter().map(|(i, c)| (*i, c.len())).collect();
        assert_eq!(lens, vec![(0, 3), (3, 3), (4, 3)]);
    }

    #[test]
    fn reset_reuses_the_cell_buffers() {
        let codec = Codec::new(3, 2).unwrap();
        let mut stripe = Stripe::new(&LAYOUT, None);
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

    #[test]
    fn checksums_cover_each_cell() {
        let codec = Codec::new(3, 2).unwrap();
        let mut stripe = Stripe::new(&LAYOUT, None);
        fill(&mut stripe, &(0..20).collect::<Vec<u8>>());
        let cells = stripe.encode_with_checksums(&codec, 4).unwrap();
        for cell in &cells {
            assert_eq!(
                cell.crcs,
                checksum::compute(&cell.data, 4),
                "cell {}",
                cell.index
            );
            assert_eq!(cell.crcs.len(), cell.data.len().div_ceil(4));
        }
    }
}
