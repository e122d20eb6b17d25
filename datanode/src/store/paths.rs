//! Where the store keeps its files.
//!
//! ```text
//! <data_dir>/datanode.id                   the datanode's identity (a uuid)
//! <data_dir>/blocks/<shard>/<key>.data     a committed block's bytes, nothing else
//! <data_dir>/blocks/<shard>/<key>.crc      its checksum sidecar
//! <data_dir>/volumes/<n>.vol|.idx|.del     packed blocks (see `volumes`)
//! <data_dir>/tmp/<key>.<n>.data|.crc       uploads in progress (wiped at start)
//! <data_dir>/quarantine/                   committed files found inconsistent at start
//! ```
//! `<key>` is `BlockKey`'s display form (`{block:016x}_{index}`), `<shard>` the
//! low byte of the block id in hex: block ids are allocated in sequence, so
//! blocks spread evenly over 256 folders.

use proto::{BlockId, BlockKey};
use std::path::{Path, PathBuf};

/// Suffix of a block's data file.
pub(crate) const DATA_SUFFIX: &str = ".data";
/// Suffix of a block's checksum sidecar.
pub(crate) const SIDECAR_SUFFIX: &str = ".crc";

/// Which file of a block a name denotes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockFile {
    Data,
    Sidecar,
}

/// The folders and file names of one store.
#[derive(Clone, Debug)]
pub(crate) struct Paths {
    /// The store's data directory.
    pub root: PathBuf,
    /// Shard folders of committed blocks.
    pub blocks: PathBuf,
    /// Volumes of packed blocks.
    pub volumes: PathBuf,
    /// Uploads in progress, wiped at start.
    pub tmp: PathBuf,
    /// Committed files found inconsistent at start.
    pub quarantine: PathBuf,
    /// File holding the datanode's uuid.
    pub identity: PathBuf,
}

impl Paths {
    /// Paths of a store rooted at `root`.
    pub fn new(root: PathBuf) -> Self {
        Self {
            blocks: root.join("blocks"),
            volumes: root.join("volumes"),
            tmp: root.join("tmp"),
            quarantine: root.join("quarantine"),
            identity: root.join("datanode.id"),
            root,
        }
    }

    /// The shard folder holding `key`'s files.
    pub fn shard_dir(&self, key: BlockKey) -> PathBuf {
        self.shard((key.block.0 & 0xff) as u8)
    }

    /// Shard folder number `shard` (of 256).
    pub fn shard(&self, shard: u8) -> PathBuf {
        self.blocks.join(format!("{shard:02x}"))
    }

    /// The committed data file of `key`.
    pub fn data(&self, key: BlockKey) -> PathBuf {
        self.shard_dir(key).join(format!("{key}{DATA_SUFFIX}"))
    }

    /// The committed checksum sidecar of `key`.
    pub fn sidecar(&self, key: BlockKey) -> PathBuf {
        self.shard_dir(key).join(format!("{key}{SIDECAR_SUFFIX}"))
    }

    /// The records of volume `volume`.
    pub fn volume(&self, volume: u32) -> PathBuf {
        super::volumes::file_path(&self.volumes, volume, "vol")
    }

    /// Temporary data file of upload number `upload` of `key`. Each upload
    /// gets its own name, so discarding one never touches a later one.
    pub fn tmp_data(&self, key: BlockKey, upload: u64) -> PathBuf {
        self.tmp.join(format!("{key}.{upload}{DATA_SUFFIX}"))
    }

    /// Temporary sidecar of upload number `upload` of `key`.
    pub fn tmp_sidecar(&self, key: BlockKey, upload: u64) -> PathBuf {
        self.tmp.join(format!("{key}.{upload}{SIDECAR_SUFFIX}"))
    }

    /// Where a suspicious file goes, keeping its name.
    pub fn quarantined(&self, path: &Path) -> PathBuf {
        let name = path.file_name().unwrap_or_default();
        self.quarantine.join(name)
    }
}

/// The block and role of a committed file name, if it is one.
pub(crate) fn parse_block_file(name: &str) -> Option<(BlockKey, BlockFile)> {
    let (stem, role) = if let Some(stem) = name.strip_suffix(DATA_SUFFIX) {
        (stem, BlockFile::Data)
    } else {
        (name.strip_suffix(SIDECAR_SUFFIX)?, BlockFile::Sidecar)
    };
    let (block, index) = stem.split_once('_')?;
    if block.len() != 16 || !block.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let block = u64::from_str_radix(block, 16).ok()?;
    if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let index = index.parse::<u8>().ok()?;
    Some((BlockKey::new(BlockId(block), index), role))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_shard_by_low_byte() {
        let paths = Paths::new(PathBuf::from("/d"));
        let key = BlockKey::new(BlockId(0x1234_5678_9abc_def0), 4);
        let data = paths.data(key);
        assert_eq!(data, PathBuf::from("/d/blocks/f0/123456789abcdef0_4.data"));
        let name = data.file_name().unwrap().to_str().unwrap();
        assert_eq!(parse_block_file(name), Some((key, BlockFile::Data)));
        let name = paths.sidecar(key);
        let name = name.file_name().unwrap().to_str().unwrap();
        assert_eq!(parse_block_file(name), Some((key, BlockFile::Sidecar)));
    }

    #[test]
    fn foreign_names_are_not_blocks() {
        for name in [
            "x.data",
            "0000000000000001_.data",
            "0000000000000001_256.data",
            "000000000000001_1.data",
            "000000000000000g_1.crc",
            "0000000000000001_1.txt",
            "0000000000000001_+1.crc",
        ] {
            assert_eq!(parse_block_file(name), None, "{name}");
        }
    }
}
