//! Replication configs and the EC stripe layout: where each byte of a block
//! group lives (internal block, offset) and how long each internal block is.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Default size of one block (of one internal block for EC), as in Ozone.
pub const DEFAULT_BLOCK_SIZE: u64 = 256 * 1024 * 1024;

/// How an object's bytes are protected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReplicationConfig {
    /// Reed-Solomon with `data` data cells and `parity` parity cells per stripe.
    Ec(EcLayout),
    /// Whole copies of each block on `replicas` distinct datanodes.
    Replicated {
        /// Number of copies.
        replicas: u8,
    },
}

/// Cells fitted to a small object ([`ReplicationConfig::fitted_to`]) are
/// multiples of this: whole pages for direct writes, and the default
/// checksum chunk. A 64 KiB granule stored a 64 KiB object as one data cell
/// and two 64 KiB parity cells (3x its size); this one, 2x.
pub const FITTED_CELL_GRANULE: u64 = 16 * 1024;

/// Why a replication config string was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown replication config {0:?}: use rs-3-2-1024k, rs-6-3-1024k, replicated-3 or replicated-1")]
pub struct UnknownReplication(pub String);

impl ReplicationConfig {
    /// rs-3-2-1024k: the default when at least five datanodes are live.
    pub const RS_3_2: Self = Self::Ec(EcLayout {
        data: 3,
        parity: 2,
        cell_size: 1024 * 1024,
    });
    /// rs-6-3-1024k.
    pub const RS_6_3: Self = Self::Ec(EcLayout {
        data: 6,
        parity: 3,
        cell_size: 1024 * 1024,
    });
    /// replicated-3.
    pub const REPLICATED_3: Self = Self::Replicated { replicas: 3 };
    /// replicated-1: no redundancy.
    pub const REPLICATED_1: Self = Self::Replicated { replicas: 1 };

    /// Every config a user may ask for, in the order of preference for defaults.
    pub const ALL: [Self; 4] = [
        Self::RS_3_2,
        Self::RS_6_3,
        Self::REPLICATED_3,
        Self::REPLICATED_1,
    ];

    /// Number of distinct datanodes a block (group) of this config needs.
    pub fn width(&self) -> usize {
        match self {
            Self::Ec(l) => l.width(),
            Self::Replicated { replicas } => *replicas as usize,
        }
    }

    /// Block files of a group enough to read all of it: `data` cells for EC,
    /// one replica.
    pub fn readable_from(&self) -> usize {
        match self {
            Self::Ec(l) => l.data as usize,
            Self::Replicated { .. } => 1,
        }
    }

    /// Fewest block files a new group may be written with when datanodes
    /// are down: enough to keep one spare beyond [`Self::readable_from`]
    /// (the rest are rebuilt once the group is committed), and never more
    /// than the full width.
    pub fn min_width(&self) -> usize {
        (self.readable_from() + 1).min(self.width())
    }

    /// Bytes of the block file at internal `index` of a group holding
    /// `group_len` bytes of object data.
    pub fn block_file_len(&self, group_len: u64, index: usize) -> u64 {
        match self {
            Self::Ec(l) => l.internal_block_len(group_len, index),
            Self::Replicated { .. } => group_len,
        }
    }

    /// Bytes of object data one block (group) holds when `block_size` is the
    /// size of one block file.
    pub fn group_capacity(&self, block_size: u64) -> u64 {
        match self {
            Self::Ec(l) => {
                // Whole stripes only, so a group boundary never splits a stripe.
                let stripes = (block_size / l.cell_size as u64).max(1);
                stripes * l.stripe_width()
            }
            Self::Replicated { .. } => block_size,
        }
    }

    /// The config a new object of `size` bytes is written with. An EC stripe
    /// wider than the object would store a whole cell of parity per parity
    /// block for a few bytes of data (a 1 MiB object in rs-3-2-1024k: 1 MiB
    /// of data, 2 MiB of parity); its cell shrinks instead to the object's
    /// share of a stripe, rounded up to [`FITTED_CELL_GRANULE`] and to a
    /// multiple of `bytes_per_checksum` (stripes start on checksum chunks).
    /// The same object then stores about `size * width / data` bytes.
    pub fn fitted_to(self, size: u64, bytes_per_checksum: u32) -> Self {
        match self {
            Self::Ec(layout) if size < layout.stripe_width() => {
                let chunk = u64::from(bytes_per_checksum.max(1));
                let granule = FITTED_CELL_GRANULE.div_ceil(chunk) * chunk;
                let share = size.div_ceil(u64::from(layout.data)).max(1);
                let cell = (share.div_ceil(granule) * granule).min(u64::from(layout.cell_size));
                Self::Ec(EcLayout {
                    // At most the layout's own cell size, which is a u32.
                    cell_size: cell as u32,
                    ..layout
                })
            }
            other => other,
        }
    }

    /// The config to use when nothing is asked: rs-3-2 with five or more live
    /// datanodes, else the widest replication that fits.
    pub fn default_for(live_datanodes: usize) -> Self {
        if live_datanodes >= Self::RS_3_2.width() {
            Self::RS_3_2
        } else if live_datanodes >= 3 {
            Self::REPLICATED_3
        } else {
            Self::REPLICATED_1
        }
    }
}

impl fmt::Display for ReplicationConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ec(l) => write!(f, "rs-{}-{}-{}k", l.data, l.parity, l.cell_size / 1024),
            Self::Replicated { replicas } => write!(f, "replicated-{replicas}"),
        }
    }
}

impl FromStr for ReplicationConfig {
    type Err = UnknownReplication;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        Self::ALL
            .into_iter()
            .find(|c| c.to_string() == wanted)
            .ok_or_else(|| UnknownReplication(s.to_string()))
    }
}

/// Geometry of a Reed-Solomon block group: stripe `s` puts data cell `i` in
/// internal block `i` and parity cell `j` in internal block `data + j`, each at
/// offset `s * cell_size` of its internal block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EcLayout {
    /// Data cells per stripe.
    pub data: u8,
    /// Parity cells per stripe.
    pub parity: u8,
    /// Bytes per cell.
    pub cell_size: u32,
}

/// Where one byte of a block group lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CellPosition {
    /// Stripe number within the group.
    pub stripe: u64,
    /// Data cell index within the stripe (= internal block index).
    pub cell: usize,
    /// Offset within the cell.
    pub offset_in_cell: u64,
}

impl CellPosition {
    /// Offset of this byte within its internal block.
    pub fn internal_offset(&self, layout: &EcLayout) -> u64 {
        self.stripe * layout.cell_size as u64 + self.offset_in_cell
    }
}

impl EcLayout {
    /// Internal blocks per group: data plus parity.
    pub fn width(&self) -> usize {
        self.data as usize + self.parity as usize
    }

    /// Object bytes per full stripe.
    pub fn stripe_width(&self) -> u64 {
        self.data as u64 * self.cell_size as u64
    }

    /// Position of byte `offset` of a block group.
    pub fn locate(&self, offset: u64) -> CellPosition {
        let stripe = offset / self.stripe_width();
        let within = offset % self.stripe_width();
        CellPosition {
            stripe,
            cell: (within / self.cell_size as u64) as usize,
            offset_in_cell: within % self.cell_size as u64,
        }
    }

    /// Length in bytes of internal block `index` of a group holding
    /// `group_len` bytes of data. Parity blocks are as long as data block 0,
    /// because a partial last stripe's parity covers its longest (first) cell.
    pub fn internal_block_len(&self, group_len: u64, index: usize) -> u64 {
        let index = if index >= self.data as usize {
            0
        } else {
            index
        };
        let cell = self.cell_size as u64;
        let full_stripes = group_len / self.stripe_width();
        let rest = group_len % self.stripe_width();
        let in_last = rest.saturating_sub(index as u64 * cell).min(cell);
        full_stripes * cell + in_last
    }

    /// Length of data cell `index` in stripe `stripe` of a group of `group_len` bytes
    /// (0 for cells past the end of a partial last stripe).
    pub fn cell_len(&self, group_len: u64, stripe: u64, index: usize) -> u64 {
        let start = stripe * self.stripe_width() + index as u64 * self.cell_size as u64;
        group_len.saturating_sub(start).min(self.cell_size as u64)
    }

    /// Number of stripes, the last possibly partial, in a group of `group_len` bytes.
    pub fn stripe_count(&self, group_len: u64) -> u64 {
        group_len.div_ceil(self.stripe_width())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell_of(config: ReplicationConfig) -> u32 {
        match config {
            ReplicationConfig::Ec(layout) => layout.cell_size,
            ReplicationConfig::Replicated { .. } => panic!("not EC"),
        }
    }

    #[test]
    fn block_files_are_as_long_as_their_internal_blocks_or_the_replica() {
        const MIB: u64 = 1024 * 1024;
        let rs = ReplicationConfig::RS_3_2;
        // Two whole stripes and 1.5 cells of a third.
        let len = 7 * MIB + MIB / 2;
        assert_eq!(rs.block_file_len(len, 0), 3 * MIB);
        assert_eq!(rs.block_file_len(len, 1), 2 * MIB + MIB / 2);
        assert_eq!(rs.block_file_len(len, 2), 2 * MIB);
        // Parity as long as the first data cell.
        assert_eq!(rs.block_file_len(len, 4), 3 * MIB);
        assert_eq!(ReplicationConfig::REPLICATED_3.block_file_len(len, 0), len);
    }

    #[test]
    fn a_small_object_gets_a_cell_fitted_to_it() {
        const KIB: u64 = 1024;
        let rs = ReplicationConfig::RS_3_2;
        // 1 MiB over three data cells: 341.4 KiB each, rounded up to 352 KiB.
        assert_eq!(cell_of(rs.fitted_to(1024 * KIB, 16 * 1024)), 352 * 1024);
        assert_eq!(cell_of(rs.fitted_to(64 * KIB, 16 * 1024)), 32 * 1024);
        assert_eq!(cell_of(rs.fitted_to(1, 16 * 1024)), 16 * 1024);
        assert_eq!(cell_of(rs.fitted_to(0, 16 * 1024)), 16 * 1024);
        assert_eq!(cell_of(rs.fitted_to(192 * KIB, 16 * 1024)), 64 * 1024);
        assert_eq!(cell_of(rs.fitted_to(192 * KIB + 1, 16 * 1024)), 80 * 1024);
        // A smaller checksum chunk keeps the granule.
        assert_eq!(cell_of(rs.fitted_to(1, 4 * 1024)), 16 * 1024);
        // A stripe the object fills, or more, keeps the layout as it is.
        assert_eq!(rs.fitted_to(3 * 1024 * KIB, 16 * 1024), rs);
        assert_eq!(rs.fitted_to(3 * 1024 * KIB - 1, 16 * 1024), rs);
        assert_eq!(rs.fitted_to(1 << 40, 16 * 1024), rs);
        // Cells stay multiples of the checksum chunk, whatever it is.
        assert_eq!(cell_of(rs.fitted_to(KIB, 48 * 1024)), 48 * 1024);
        assert_eq!(cell_of(rs.fitted_to(KIB, 1024 * 1024)), 1024 * 1024);
        // Replication has no cells.
        let copies = ReplicationConfig::REPLICATED_3;
        assert_eq!(copies.fitted_to(1, 16 * 1024), copies);
        let wide = ReplicationConfig::RS_6_3.fitted_to(1024 * KIB, 16 * 1024);
        assert_eq!(cell_of(wide), 176 * 1024);
    }

    #[test]
    fn parses_and_prints_every_config() {
        for c in ReplicationConfig::ALL {
            assert_eq!(c.to_string().parse::<ReplicationConfig>(), Ok(c));
        }
        assert_eq!("RS-6-3-1024K".parse(), Ok(ReplicationConfig::RS_6_3));
        assert_eq!("rs-3-2-1024k".parse(), Ok(ReplicationConfig::RS_3_2));
        assert!("rs-4-2-1024k".parse::<ReplicationConfig>().is_err());
        assert!("".parse::<ReplicationConfig>().is_err());
    }

    #[test]
    fn default_follows_live_datanodes() {
        assert_eq!(ReplicationConfig::default_for(5), ReplicationConfig::RS_3_2);
        assert_eq!(
            ReplicationConfig::default_for(4),
            ReplicationConfig::REPLICATED_3
        );
        assert_eq!(
            ReplicationConfig::default_for(1),
            ReplicationConfig::REPLICATED_1
        );
    }

    #[test]
    fn locate_maps_round_robin_cells() {
        let l = EcLayout {
            data: 3,
            parity: 2,
            cell_size: 10,
        };
        assert_eq!(
            l.locate(0),
            CellPosition {
                stripe: 0,
                cell: 0,
                offset_in_cell: 0
            }
        );
        assert_eq!(
            l.locate(25),
            CellPosition {
                stripe: 0,
                cell: 2,
                offset_in_cell: 5
            }
        );
        let p = l.locate(31);
        assert_eq!(
            p,
            CellPosition {
                stripe: 1,
                cell: 0,
                offset_in_cell: 1
            }
        );
        assert_eq!(p.internal_offset(&l), 11);
    }

    #[test]
    fn internal_block_lengths_sum_to_group_length() {
        let l = EcLayout {
            data: 3,
            parity: 2,
            cell_size: 10,
        };
        for len in 0..200u64 {
            let sum: u64 = (0..3).map(|i| l.internal_block_len(len, i)).sum();
            assert_eq!(sum, len, "group of {len}");
            for p in 3..5 {
                assert_eq!(l.internal_block_len(len, p), l.internal_block_len(len, 0));
            }
            let cells: u64 = (0..l.stripe_count(len))
                .flat_map(|s| (0..3).map(move |i| (s, i)))
                .map(|(s, i)| l.cell_len(len, s, i))
                .sum();
            assert_eq!(cells, len);
        }
        assert_eq!(l.internal_block_len(35, 0), 15);
        assert_eq!(l.internal_block_len(35, 1), 10);
        assert_eq!(l.internal_block_len(35, 2), 10);
    }

    #[test]
    fn degraded_groups_keep_one_spare() {
        assert_eq!(ReplicationConfig::RS_3_2.readable_from(), 3);
        assert_eq!(ReplicationConfig::RS_3_2.min_width(), 4);
        assert_eq!(ReplicationConfig::RS_6_3.min_width(), 7);
        assert_eq!(ReplicationConfig::REPLICATED_3.readable_from(), 1);
        assert_eq!(ReplicationConfig::REPLICATED_3.min_width(), 2);
        assert_eq!(ReplicationConfig::REPLICATED_1.min_width(), 1);
        let no_parity = ReplicationConfig::Ec(EcLayout {
            data: 2,
            parity: 0,
            cell_size: 4096,
        });
        assert_eq!(no_parity.min_width(), 2);
    }

    #[test]
    fn group_capacity_holds_whole_stripes() {
        let c = ReplicationConfig::RS_3_2;
        assert_eq!(c.group_capacity(DEFAULT_BLOCK_SIZE), 3 * DEFAULT_BLOCK_SIZE);
        assert_eq!(ReplicationConfig::REPLICATED_3.group_capacity(100), 100);
    }
}
