//! Reed-Solomon erasure codec over GF(2^8): computes the parity cells of a
//! stripe and rebuilds lost cells from any `data` surviving ones.
//!
//! Building an encoder inverts a matrix, so a [`CodecTable`] builds each
//! (data, parity) once and shares it with every stream of its owner (the
//! block client keeps one).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use parking_lot::RwLock;
use reed_solomon_erasure::galois_8::ReedSolomon;
use std::collections::HashMap;
use std::sync::Arc;

/// Why encoding or reconstruction failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// The (data, parity) pair cannot be coded (zero cells or over 256 cells).
    #[error("unsupported erasure code: {data} data and {parity} parity cells")]
    Unsupported {
        /// Data cells asked for.
        data: usize,
        /// Parity cells asked for.
        parity: usize,
    },
    /// The caller passed the wrong number of cells.
    #[error("expected {expected} cells, got {got}")]
    CellCount {
        /// Cells the code needs.
        expected: usize,
        /// Cells passed.
        got: usize,
    },
    /// The cells were not all of the same length.
    #[error("cells of a stripe must have equal lengths")]
    CellLength,
    /// Fewer than `data` cells survive, so the stripe cannot be rebuilt.
    #[error("only {present} cells present, {needed} needed to reconstruct")]
    TooManyLost {
        /// Cells still available.
        present: usize,
        /// Cells needed to rebuild.
        needed: usize,
    },
    /// The underlying library refused (should not happen after our checks).
    #[error("reed-solomon: {0}")]
    Library(String),
}

impl From<reed_solomon_erasure::Error> for CodecError {
    fn from(e: reed_solomon_erasure::Error) -> Self {
        Self::Library(e.to_string())
    }
}

/// A Reed-Solomon code with `data` data cells and `parity` parity cells per stripe.
pub struct Codec {
    data: usize,
    parity: usize,
    rs: ReedSolomon,
}

/// Codecs by (data, parity), each built on first use and shared after.
#[derive(Default)]
pub struct CodecTable {
    codecs: RwLock<HashMap<(usize, usize), Arc<Codec>>>,
}

impl CodecTable {
    /// The shared codec for (`data`, `parity`), built on first use.
    pub fn get(&self, data: usize, parity: usize) -> Result<Arc<Codec>, CodecError> {
        if let Some(codec) = self.codecs.read().get(&(data, parity)) {
            return Ok(codec.clone());
        }
        let mut codecs = self.codecs.write();
        if let Some(codec) = codecs.get(&(data, parity)) {
            return Ok(codec.clone());
        }
        let codec = Arc::new(Codec::new(data, parity)?);
        codecs.insert((data, parity), codec.clone());
        Ok(codec)
    }
}

impl Codec {
    /// A codec for (`data`, `parity`); prefer a [`CodecTable`]'s shared one.
    pub fn new(data: usize, parity: usize) -> Result<Codec, CodecError> {
        let rs =
            ReedSolomon::new(data, parity).map_err(|_| CodecError::Unsupported { data, parity })?;
        Ok(Codec { data, parity, rs })
    }

    /// Number of data cells per stripe.
    pub fn data_cells(&self) -> usize {
        self.data
    }

    /// Number of parity cells per stripe.
    pub fn parity_cells(&self) -> usize {
        self.parity
    }

    /// Computes `parity` from `data`; every cell, data and parity, must have
    /// the same length (callers zero-pad short data cells first).
    pub fn encode<D, P>(&self, data: &[D], parity: &mut [P]) -> Result<(), CodecError>
    where
        D: AsRef<[u8]>,
        P: AsRef<[u8]> + AsMut<[u8]>,
    {
        self.check_count(data.len(), self.data)?;
        self.check_count(parity.len(), self.parity)?;
        let len = data[0].as_ref().len();
        let same = data.iter().all(|c| c.as_ref().len() == len)
            && parity.iter().all(|c| c.as_ref().len() == len);
        if !same {
            return Err(CodecError::CellLength);
        }
        if len == 0 {
            return Ok(());
        }
        self.rs.encode_sep(data, parity)?;
        Ok(())
    }

    /// Fills in the missing (`None`) data cells of a stripe from any `data`
    /// present cells of equal length; missing parity cells stay `None`.
    pub fn reconstruct_data(&self, cells: &mut [Option<Vec<u8>>]) -> Result<(), CodecError> {
        self.reconstruct_cells(cells, true)
    }

    /// Fills in every missing cell, data and parity (for repair).
    pub fn reconstruct_all(&self, cells: &mut [Option<Vec<u8>>]) -> Result<(), CodecError> {
        self.reconstruct_cells(cells, false)
    }

    fn reconstruct_cells(
        &self,
        cells: &mut [Option<Vec<u8>>],
        data_only: bool,
    ) -> Result<(), CodecError> {
        self.check_count(cells.len(), self.data + self.parity)?;
        let mut present = cells.iter().flatten();
        let len = match present.next() {
            Some(first) => first.len(),
            None => {
                return Err(CodecError::TooManyLost {
                    present: 0,
                    needed: self.data,
                })
            }
        };
        if present.any(|c| c.len() != len) {
            return Err(CodecError::CellLength);
        }
        let count = cells.iter().flatten().count();
        if count < self.data {
            return Err(CodecError::TooManyLost {
                present: count,
                needed: self.data,
            });
        }
        let wanted = if data_only { self.data } else { cells.len() };
        if len == 0 {
            // The library refuses empty cells; empty cells rebuild to empty cells.
            for cell in &mut cells[..wanted] {
                cell.get_or_insert_with(Vec::new);
            }
            return Ok(());
        }
        if data_only {
            self.rs.reconstruct_data(cells)?;
        } else {
            self.rs.reconstruct(cells)?;
        }
        Ok(())
    }

    fn check_count(&self, got: usize, expected: usize) -> Result<(), CodecError> {
        if got == expected {
            Ok(())
        } else {
            Err(CodecError::CellCount { expected, got })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn random_stripe(codec: &Codec, len: usize, seed: u64) -> Vec<Vec<u8>> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let data: Vec<Vec<u8>> = (0..codec.data_cells())
            .map(|_| (0..len).map(|_| rng.gen()).collect())
            .collect();
        let mut parity = vec![vec![0u8; len]; codec.parity_cells()];
        codec.encode(&data, &mut parity).unwrap();
        data.into_iter().chain(parity).collect()
    }

    /// Every subset of `0..n` with at most `max` members.
    fn subsets(n: usize, max: usize) -> Vec<Vec<usize>> {
        (0u32..1 << n)
            .filter(|m| m.count_ones() as usize <= max)
            .map(|m| (0..n).filter(|i| m & (1 << i) != 0).collect())
            .collect()
    }

    fn check_every_loss(data: usize, parity: usize) {
        let codec = Codec::new(data, parity).unwrap();
        let stripe = random_stripe(&codec, 1000, (data * 31 + parity) as u64);
        let width = data + parity;
        for lost in subsets(width, parity) {
            let mut cells: Vec<Option<Vec<u8>>> = stripe.iter().cloned().map(Some).collect();
            for &i in &lost {
                cells[i] = None;
            }
            let mut all = cells.clone();
            codec.reconstruct_data(&mut cells).unwrap();
            for i in 0..data {
                assert_eq!(
                    cells[i].as_ref(),
                    Some(&stripe[i]),
                    "lost {lost:?}, cell {i}"
                );
            }
            codec.reconstruct_all(&mut all).unwrap();
            for i in 0..width {
                assert_eq!(all[i].as_ref(), Some(&stripe[i]), "lost {lost:?}, cell {i}");
            }
        }
        for lost in subsets(width, parity + 1)
            .into_iter()
            .filter(|l| l.len() == parity + 1)
        {
            let mut cells: Vec<Option<Vec<u8>>> = stripe.iter().cloned().map(Some).collect();
            for &i in &lost {
                cells[i] = None;
            }
            assert_eq!(
                codec.reconstruct_data(&mut cells),
                Err(CodecError::TooManyLost {
                    present: width - parity - 1,
                    needed: data
                })
            );
        }
    }

    #[test]
    fn rs_3_2_rebuilds_every_loss_up_to_parity() {
        check_every_loss(3, 2);
    }

    #[test]
    fn rs_6_3_rebuilds_every_loss_up_to_parity() {
        check_every_loss(6, 3);
    }

    #[test]
    fn encoders_are_shared() {
        let table = CodecTable::default();
        let a = table.get(3, 2).unwrap();
        let b = table.get(3, 2).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &table.get(6, 3).unwrap()));
    }

    #[test]
    fn refuses_bad_shapes() {
        assert!(matches!(
            Codec::new(0, 2),
            Err(CodecError::Unsupported { .. })
        ));
        assert!(matches!(
            Codec::new(3, 0),
            Err(CodecError::Unsupported { .. })
        ));
        let codec = Codec::new(3, 2).unwrap();
        let mut parity = vec![vec![0u8; 4]; 2];
        assert_eq!(
            codec.encode(&[vec![0u8; 4], vec![0u8; 4]], &mut parity),
            Err(CodecError::CellCount {
                expected: 3,
                got: 2
            })
        );
        assert_eq!(
            codec.encode(&[vec![0u8; 4], vec![0u8; 4], vec![0u8; 3]], &mut parity),
            Err(CodecError::CellLength)
        );
        let mut cells = vec![Some(vec![1u8; 4]), Some(vec![1u8; 3]), None, None, None];
        assert_eq!(
            codec.reconstruct_data(&mut cells),
            Err(CodecError::CellLength)
        );
    }

    #[test]
    fn zero_length_cells_rebuild_to_empty() {
        let codec = Codec::new(3, 2).unwrap();
        let mut cells = vec![None, Some(vec![]), Some(vec![]), Some(vec![]), None];
        codec.reconstruct_data(&mut cells).unwrap();
        assert_eq!(cells[0], Some(vec![]));
        assert_eq!(cells[4], None);
    }
}
