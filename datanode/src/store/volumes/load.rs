//! Opening the volumes at start: each one's index read and checked, its
//! unindexed tail scanned record by record, a torn tail cut off, its
//! tombstones applied.

use super::record::{self, RecordHead, INDEX_ENTRY_LEN, TOMBSTONE_LEN};
use super::writer::Active;
use super::{volume_number, Packed, VolumeUse};
use crate::error::StoreError;
use proto::{checksum, durable, BlockKey};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bytes read at a time while looking for the next record past damage.
const SEARCH_WINDOW: usize = 1 << 20;

/// What the volumes of a folder hold.
pub(super) struct Loaded {
    /// The live cells, one per key.
    pub live: Vec<Packed>,
    pub usage: BTreeMap<u32, VolumeUse>,
    pub readers: HashMap<u32, Arc<File>>,
    /// The last volume, to go on appending to.
    pub resume: Option<Active>,
    pub next_volume: u32,
    pub next_generation: u64,
}

/// One volume's records, as checked.
struct Volume {
    id: u32,
    file: File,
    index: File,
    index_len: u64,
    len: u64,
    records: Vec<Packed>,
    tombstones: HashSet<(BlockKey, u64)>,
}

pub(super) fn load(dir: &Path, fsync: bool) -> Result<Loaded, StoreError> {
    durable::create_private_dir(dir)
        .map_err(|e| StoreError::io(format!("create {}", dir.display()), e))?;
    let mut ids: Vec<u32> = fs::read_dir(dir)
        .map_err(|e| StoreError::io(format!("list {}", dir.display()), e))?
        .flatten()
        .filter_map(|entry| volume_number(&entry.path()))
        .collect();
    ids.sort_unstable();
    remove_strays(dir, &ids)?;
    let mut loaded = Loaded {
        live: Vec::new(),
        usage: BTreeMap::new(),
        readers: HashMap::new(),
        resume: None,
        next_volume: ids.last().map_or(1, |last| last + 1),
        next_generation: 1,
    };
    let mut newest: HashMap<BlockKey, Packed> = HashMap::new();
    let mut last = None;
    for id in ids {
        let volume = load_volume(dir, id, fsync)?;
        let mut usage = VolumeUse {
            volume: id,
            bytes: volume.len,
            live: 0,
        };
        for packed in &volume.records {
            loaded.next_generation = loaded.next_generation.max(packed.head.generation + 1);
            if volume
                .tombstones
                .contains(&(packed.head.key, packed.head.generation))
            {
                continue;
            }
            usage.live += packed.head.record_len();
            if let Some(older) = newest.insert(packed.head.key, *packed) {
                // Two live records of one cell: the newer one is the cell.
                let (keep, drop) = match older.head.generation > packed.head.generation {
                    true => (older, *packed),
                    false => (*packed, older),
                };
                newest.insert(keep.head.key, keep);
                if let Some(u) = loaded.usage.get_mut(&drop.volume) {
                    u.live -= drop.head.record_len();
                } else {
                    usage.live -= drop.head.record_len();
                }
            }
        }
        let reader = File::open(dir.join(format!("{id:08}.vol")))
            .map_err(|e| StoreError::io(format!("open volume {id}"), e))?;
        loaded.readers.insert(id, Arc::new(reader));
        loaded.usage.insert(id, usage);
        last = Some(volume);
    }
    loaded.live = newest.into_values().collect();
    loaded.resume = last.map(|v| Active {
        id: v.id,
        file: v.file,
        len: v.len,
        index: v.index,
        index_len: v.index_len,
    });
    Ok(loaded)
}

fn load_volume(dir: &Path, id: u32, fsync: bool) -> Result<Volume, StoreError> {
    let path = |suffix: &str| dir.join(format!("{id:08}.{suffix}"));
    let open = |path: PathBuf| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| StoreError::io(format!("open {}", path.display()), e))
    };
    let io = |what: &str, e| StoreError::io(format!("{what} volume {id}"), e);
    let file = open(path("vol"))?;
    let index = open(path("idx"))?;
    let file_len = file.metadata().map_err(|e| io("stat", e))?.len();
    let (mut records, indexed_to) =
        read_index(&index, id, file_len).map_err(|e| io("index of", e))?;
    let indexed = records.len();
    let scan = scan(&file, id, indexed_to, file_len).map_err(|e| io("scan", e))?;
    records.extend(scan.records);
    let len = scan.end;
    if len < file_len {
        tracing::warn!(
            volume = id,
            from = len,
            bytes = file_len - len,
            "cut a torn tail off a volume"
        );
        file.set_len(len).map_err(|e| io("cut", e))?;
        if fsync {
            file.sync_data().map_err(|e| io("sync", e))?;
        }
    }
    // Rewrite the index past its good prefix with what the scan found.
    let mut index_len = (indexed * INDEX_ENTRY_LEN) as u64;
    let index_file_len = index.metadata().map_err(|e| io("stat index of", e))?.len();
    if records.len() > indexed || index_file_len != index_len {
        let mut entries = Vec::new();
        for packed in &records[indexed..] {
            entries.extend_from_slice(&packed.head.index_entry(packed.offset));
        }
        index
            .set_len(index_len)
            .map_err(|e| io("cut index of", e))?;
        index
            .write_all_at(&entries, index_len)
            .map_err(|e| io("rewrite index of", e))?;
        index_len += entries.len() as u64;
    }
    let tombstones = read_tombstones(&path("del"), fsync).map_err(|e| io("tombstones of", e))?;
    Ok(Volume {
        id,
        file,
        index,
        index_len,
        len,
        records,
        tombstones,
    })
}

/// The records the index lists, in order, as far as its entries are whole
/// and each lies inside the volume after the one before; and where the last
/// of them ends.
fn read_index(index: &File, id: u32, file_len: u64) -> std::io::Result<(Vec<Packed>, u64)> {
    let len = index.metadata()?.len() as usize;
    let mut raw = vec![0u8; len - len % INDEX_ENTRY_LEN];
    index.read_exact_at(&mut raw, 0)?;
    let mut records = Vec::with_capacity(raw.len() / INDEX_ENTRY_LEN);
    let mut end = 0;
    for entry in raw.chunks_exact(INDEX_ENTRY_LEN) {
        let entry: &[u8; INDEX_ENTRY_LEN] = entry.try_into().expect("exact chunk");
        let Some((offset, head)) = RecordHead::decode_index_entry(entry) else {
            break;
        };
        let record_end = offset.saturating_add(head.record_len());
        if offset < end || record_end > file_len {
            break;
        }
        records.push(Packed {
            volume: id,
            offset,
            head,
        });
        end = record_end;
    }
    Ok((records, end))
}

/// Records found by a scan, and where the good part of the volume ends.
struct Scanned {
    records: Vec<Packed>,
    end: u64,
}

/// Reads records from `from` to `len`, each checked whole (header CRC and
/// every chunk CRC). Damage followed by a good record is skipped (and
/// logged); damage with none after it is the torn tail, where the good part
/// ends.
fn scan(file: &File, id: u32, from: u64, len: u64) -> std::io::Result<Scanned> {
    let mut records = Vec::new();
    let mut at = from;
    while at < len {
        if let Some(head) = read_record(file, at, len)? {
            records.push(Packed {
                volume: id,
                offset: at,
                head,
            });
            at += head.record_len();
            continue;
        }
        match next_record(file, at + 1, len)? {
            Some(next) => {
                tracing::error!(
                    volume = id,
                    from = at,
                    bytes = next - at,
                    "skipped a damaged stretch of a volume"
                );
                at = next;
            }
            None => break,
        }
    }
    Ok(Scanned {
        records,
        end: at.min(len),
    })
}

/// The record at `at`, if a whole and good one starts there.
fn read_record(file: &File, at: u64, len: u64) -> std::io::Result<Option<RecordHead>> {
    if len - at < record::FIXED_LEN {
        return Ok(None);
    }
    let mut fixed = [0u8; record::FIXED_LEN as usize];
    file.read_exact_at(&mut fixed, at)?;
    let Some(head) = RecordHead::decode_fixed(&fixed) else {
        return Ok(None);
    };
    if head.length > len - at || head.record_len() > len - at {
        return Ok(None);
    }
    let mut whole = vec![0u8; head.record_len() as usize];
    file.read_exact_at(&mut whole, at)?;
    let Some(crcs) = record::check_header(&head, &whole) else {
        return Ok(None);
    };
    let data = &whole[head.header_len() as usize..];
    Ok(checksum::verify(data, 0, head.bytes_per_checksum, &crcs)
        .is_ok()
        .then_some(head))
}

/// Where the next good record after `from` starts, if any.
fn next_record(file: &File, from: u64, len: u64) -> std::io::Result<Option<u64>> {
    let mut window = vec![0u8; SEARCH_WINDOW];
    let mut at = from;
    while at < len {
        let n = (len - at).min(SEARCH_WINDOW as u64) as usize;
        file.read_exact_at(&mut window[..n], at)?;
        for i in 0..n.saturating_sub(3) {
            if window[i..i + 4] == *b"TSVR" && read_record(file, at + i as u64, len)?.is_some() {
                return Ok(Some(at + i as u64));
            }
        }
        // Overlap by three bytes, so a magic across windows is not missed.
        at += n.saturating_sub(3).max(1) as u64;
    }
    Ok(None)
}

/// The tombstones of a volume, as far as they are whole: a torn last one
/// is a delete never acknowledged, cut off so later ones follow good ones.
fn read_tombstones(path: &Path, fsync: bool) -> std::io::Result<HashSet<(BlockKey, u64)>> {
    let raw = match fs::read(path) {
        Ok(raw) => raw,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashSet::new()),
        Err(e) => return Err(e),
    };
    let mut stones = HashSet::new();
    let mut good = 0;
    for stone in raw.chunks_exact(TOMBSTONE_LEN) {
        let stone: &[u8; TOMBSTONE_LEN] = stone.try_into().expect("exact chunk");
        match record::decode_tombstone(stone) {
            Some(deleted) => {
                stones.insert(deleted);
                good += TOMBSTONE_LEN;
            }
            None => break,
        }
    }
    if good < raw.len() {
        tracing::warn!(path = %path.display(), bytes = raw.len() - good, "cut a torn tail off a tombstone file");
        let file = OpenOptions::new().write(true).open(path)?;
        file.set_len(good as u64)?;
        if fsync {
            file.sync_data()?;
        }
    }
    Ok(stones)
}

/// Removes index and tombstone files whose volume is gone: what a crash in
/// the middle of retiring a volume leaves.
fn remove_strays(dir: &Path, volumes: &[u32]) -> Result<(), StoreError> {
    let entries =
        fs::read_dir(dir).map_err(|e| StoreError::io(format!("list {}", dir.display()), e))?;
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(stem) = path
            .extension()
            .filter(|ext| *ext == "idx" || *ext == "del")
            .and_then(|_| path.file_stem()?.to_str())
        else {
            continue;
        };
        let Ok(number) = stem.parse::<u32>() else {
            continue;
        };
        if stem.len() == 8 && volumes.binary_search(&number).is_err() {
            tracing::info!(path = %path.display(), "removing the leftover of a retired volume");
            fs::remove_file(&path)
                .map_err(|e| StoreError::io(format!("remove {}", path.display()), e))?;
        }
    }
    Ok(())
}
