//! What the store does when it opens: creates its folders, wipes uploads that
//! never committed, loads the identity, and rebuilds the list of committed
//! blocks, setting aside any whose files disagree.

use super::paths::{parse_block_file, BlockFile, Paths};
use super::sidecar::SidecarHeader;
use super::BlockMeta;
use crate::error::StoreError;
use proto::{durable, BlockKey, DatanodeId};
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::path::Path;

/// The committed blocks found on disk.
pub(super) struct Recovered {
    /// Each committed block and its metadata.
    pub blocks: HashMap<BlockKey, BlockMeta>,
    /// Total length of the committed blocks.
    pub used: u64,
}

/// Fsyncs a folder, making renames and creations inside it durable.
pub(super) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    durable::sync_dir(dir).map_err(|e| StoreError::io(format!("fsync folder {}", dir.display()), e))
}

/// Creates `dir` (and its parents) so that its name survives a power cut.
fn create_dir(dir: &Path) -> Result<(), StoreError> {
    durable::create_private_dir(dir)
        .map_err(|e| StoreError::io(format!("create {}", dir.display()), e))
}

/// Creates `dir` in its existing parent, unless it is there already.
pub(super) fn create_if_missing(dir: &Path) -> Result<(), StoreError> {
    match fs::create_dir(dir) {
        Err(e) if e.kind() != ErrorKind::AlreadyExists => {
            Err(StoreError::io(format!("create {}", dir.display()), e))
        }
        _ => Ok(()),
    }
}

/// The identity kept in a data folder, if it has one yet.
pub(super) fn read_identity(paths: &Paths) -> Result<Option<DatanodeId>, StoreError> {
    match fs::read_to_string(&paths.identity) {
        Ok(text) => {
            let id = uuid::Uuid::parse_str(text.trim()).map_err(|e| StoreError::Corrupt {
                path: paths.identity.clone(),
                reason: format!("not a uuid: {e}"),
            })?;
            Ok(Some(DatanodeId(id.to_string())))
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io(
            format!("read {}", paths.identity.display()),
            e,
        )),
    }
}

/// The datanode's identity, kept in the data folder: `wanted` (its
/// credential's) or a new one when the folder has none yet.
pub(super) fn load_or_create_identity(
    paths: &Paths,
    wanted: Option<&DatanodeId>,
) -> Result<DatanodeId, StoreError> {
    let wanted = wanted.map(normalized).transpose()?;
    match (read_identity(paths)?, wanted) {
        (Some(id), Some(wanted)) if wanted != id => Err(StoreError::Invalid(format!(
            "{} holds datanode {id}, but the credential is datanode {wanted}'s",
            paths.root.display()
        ))),
        (Some(id), _) => Ok(id),
        (None, wanted) => {
            let id = wanted.map_or_else(|| uuid::Uuid::new_v4().to_string(), |id| id.0);
            let tmp = paths.tmp.join("datanode.id");
            let written = File::create(&tmp).and_then(|mut f| {
                f.write_all(format!("{id}\n").as_bytes())?;
                f.sync_all()
            });
            written.map_err(|e| StoreError::io(format!("write {}", tmp.display()), e))?;
            fs::rename(&tmp, &paths.identity).map_err(|e| {
                StoreError::io(format!("rename to {}", paths.identity.display()), e)
            })?;
            sync_dir(&paths.root)?;
            tracing::info!(id = %id, dir = %paths.root.display(), "datanode identity written to the disk");
            Ok(DatanodeId(id))
        }
    }
}

/// The identity of the datanode whose disks `disks` are: `wanted` (its
/// credential's), the one its disks hold, or a new one when none holds
/// any. Disks holding two identities, or another than `wanted`, are
/// refused. A disk whose identity cannot be read for a failing device is
/// passed over (it fails again as it opens). Blocking.
pub(super) fn agree_on_identity(
    disks: &[Paths],
    wanted: Option<&DatanodeId>,
) -> Result<DatanodeId, StoreError> {
    let mut agreed: Option<(DatanodeId, &Path)> = match wanted {
        Some(id) => Some((normalized(id)?, Path::new("the credential"))),
        None => None,
    };
    for paths in disks {
        let found = match read_identity(paths) {
            Ok(found) => found,
            Err(e) if super::disks::means_disk_failure(&e) => None,
            Err(e) => return Err(e),
        };
        match (found, &agreed) {
            (Some(id), Some((agreed, from))) if id != *agreed => {
                return Err(StoreError::Invalid(format!(
                    "{} holds datanode {id}, but {} names datanode {agreed}",
                    paths.root.display(),
                    from.display()
                )))
            }
            (Some(id), None) => agreed = Some((id, &paths.root)),
            _ => {}
        }
    }
    Ok(match agreed {
        Some((id, _)) => id,
        None => {
            let id = DatanodeId(uuid::Uuid::new_v4().to_string());
            tracing::info!(id = %id, "new datanode identity");
            id
        }
    })
}

/// `id` in the canonical form of a uuid.
fn normalized(id: &DatanodeId) -> Result<DatanodeId, StoreError> {
    let uuid = uuid::Uuid::parse_str(&id.0)
        .map_err(|e| StoreError::Invalid(format!("datanode id {id} is not a uuid: {e}")))?;
    Ok(DatanodeId(uuid.to_string()))
}

/// Creates the folders, every shard folder among them (so that no commit
/// depends on a folder another commit created and has not synced yet), and
/// wipes `tmp/`.
pub(super) fn prepare_folders(paths: &Paths) -> Result<(), StoreError> {
    create_dir(&paths.root)?;
    create_dir(&paths.blocks)?;
    create_dir(&paths.tmp)?;
    for shard in 0..=u8::MAX {
        create_if_missing(&paths.shard(shard))?;
    }
    sync_dir(&paths.blocks)?;
    let entries = fs::read_dir(&paths.tmp)
        .map_err(|e| StoreError::io(format!("list {}", paths.tmp.display()), e))?;
    let mut removed = 0usize;
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io("list tmp", e))?;
        let path = entry.path();
        let result = if entry.file_type().is_ok_and(|t| t.is_dir()) {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        result.map_err(|e| StoreError::io(format!("remove {}", path.display()), e))?;
        removed += 1;
    }
    if removed > 0 {
        tracing::info!(removed, "removed uploads left over from a previous run");
    }
    Ok(())
}

/// Lists the committed blocks, quarantining inconsistent ones.
pub(super) fn load_blocks(paths: &Paths) -> Result<Recovered, StoreError> {
    let mut recovered = Recovered {
        blocks: HashMap::new(),
        used: 0,
    };
    for shard in list(&paths.blocks)? {
        if !shard.is_dir() {
            tracing::warn!(path = %shard.display(), "ignoring a stray file among the block shards");
            continue;
        }
        // Names are collected first: quarantining renames files out of the folder.
        for path in list(&shard)? {
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            match parse_block_file(name) {
                Some((key, BlockFile::Sidecar)) => match check_block(paths, key) {
                    Ok(meta) => {
                        recovered.used += meta.length;
                        recovered.blocks.insert(key, meta);
                    }
                    Err(reason) => {
                        quarantine(paths, &paths.sidecar(key), &reason);
                        quarantine(paths, &paths.data(key), &reason);
                    }
                },
                Some((key, BlockFile::Data)) => {
                    if !paths.sidecar(key).exists() {
                        quarantine(paths, &path, "data file without a checksum sidecar");
                    }
                }
                None => {
                    tracing::warn!(path = %path.display(), "ignoring a file that is not a block file");
                }
            }
        }
    }
    Ok(recovered)
}

fn list(dir: &Path) -> Result<Vec<std::path::PathBuf>, StoreError> {
    let entries =
        fs::read_dir(dir).map_err(|e| StoreError::io(format!("list {}", dir.display()), e))?;
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io(format!("list {}", dir.display()), e))?;
        out.push(entry.path());
    }
    out.sort();
    Ok(out)
}

/// Checks that a committed block's sidecar is well-formed and its data file
/// has the length the sidecar records.
fn check_block(paths: &Paths, key: BlockKey) -> Result<BlockMeta, String> {
    let sidecar = File::open(paths.sidecar(key)).map_err(|e| format!("open sidecar: {e}"))?;
    let header = SidecarHeader::read(&sidecar)?;
    let data_len = fs::metadata(paths.data(key))
        .map_err(|e| format!("stat data file: {e}"))?
        .len();
    if data_len != header.length {
        return Err(format!(
            "data file is {data_len} bytes, its sidecar records {}",
            header.length
        ));
    }
    Ok(BlockMeta {
        length: header.length,
        bytes_per_checksum: header.bytes_per_checksum,
    })
}

/// Moves `path` (when it exists) into the quarantine folder, never to be served.
pub(super) fn quarantine(paths: &Paths, path: &Path, reason: &str) {
    if !path.exists() {
        return;
    }
    let target = paths.quarantined(path);
    let result = fs::create_dir_all(&paths.quarantine).and_then(|()| fs::rename(path, &target));
    match result {
        Ok(()) => tracing::error!(
            path = %path.display(), to = %target.display(), reason,
            "quarantined an inconsistent block file"
        ),
        Err(e) => tracing::error!(
            path = %path.display(), reason, error = %e,
            "inconsistent block file could not be quarantined; ignoring it"
        ),
    }
}
