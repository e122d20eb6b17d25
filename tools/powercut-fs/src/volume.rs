//! The files of a volume as programs see them, and the part of them that
//! would survive a power cut.
//!
//! Everything lives in memory (the *volatile* view). The *durable* view is
//! a folder on the real disk, changed only by a sync: fsync of a file writes
//! its changed pages and its length there (`data/<inode>`); fsync of a
//! folder records that folder's entries (`namespace.json`). Nothing else
//! ever reaches it: a new file whose folder was never synced is gone after a
//! power cut, however often the file itself was synced, and a rename or an
//! unlink is undone. This is stricter than ext4 or XFS usually are, on
//! purpose: a program that survives it syncs everything a POSIX filesystem
//! may lose.
//!
//! [`Volume::open`] rebuilds the volatile view from the durable one, which
//! is what the next boot after a power cut sees.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The inode of the root folder.
pub const ROOT: u64 = 1;

/// The unit in which changed file contents are tracked and written back.
const PAGE: u64 = 4096;

const NAMESPACE_FILE: &str = "namespace.json";
const DATA_DIR: &str = "data";

/// Why an operation on the volume failed; each maps to one errno.
#[derive(Debug, PartialEq, Eq)]
pub enum FsError {
    NotFound,
    Exists,
    NotADirectory,
    IsADirectory,
    NotEmpty,
    Invalid,
    /// The durable folder could not be read or written.
    Io(String),
}

impl FsError {
    /// The errno the kernel passes on to the program.
    pub fn errno(&self) -> i32 {
        match self {
            FsError::NotFound => libc::ENOENT,
            FsError::Exists => libc::EEXIST,
            FsError::NotADirectory => libc::ENOTDIR,
            FsError::IsADirectory => libc::EISDIR,
            FsError::NotEmpty => libc::ENOTEMPTY,
            FsError::Invalid => libc::EINVAL,
            FsError::Io(_) => libc::EIO,
        }
    }
}

fn io(what: &str, path: &Path, e: std::io::Error) -> FsError {
    FsError::Io(format!("{what} {}: {e}", path.display()))
}

/// What an inode is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    File,
    Folder,
    /// A Unix socket's name (the datanode's short-circuit socket); no bytes.
    Socket,
}

/// What `stat` says about an inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attributes {
    pub inode: u64,
    pub kind: Kind,
    pub size: u64,
    pub perm: u16,
    pub links: u32,
    pub modified: SystemTime,
}

/// One entry of a folder listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub inode: u64,
    pub kind: Kind,
}

/// The durable record of the namespace: what synced folders held.
#[derive(Default, Serialize, Deserialize)]
struct Namespace {
    /// Inodes above every inode this volume ever gave out.
    next_inode: u64,
    /// Each synced folder's entries.
    folders: BTreeMap<u64, BTreeMap<String, u64>>,
    /// Kind and permissions of every inode a synced folder names.
    inodes: BTreeMap<u64, DurableInode>,
}

#[derive(Clone, Copy, Serialize, Deserialize)]
struct DurableInode {
    kind: Kind,
    perm: u16,
}

enum Contents {
    File(FileContents),
    Folder(BTreeMap<String, u64>),
    Socket,
}

impl Contents {
    fn empty(kind: Kind) -> Contents {
        match kind {
            Kind::File => Contents::File(FileContents::default()),
            Kind::Folder => Contents::Folder(BTreeMap::new()),
            Kind::Socket => Contents::Socket,
        }
    }
}

#[derive(Default)]
struct FileContents {
    bytes: Vec<u8>,
    /// Pages changed since the last fsync of this file.
    dirty: BTreeSet<u64>,
    /// The length changed since the last fsync.
    resized: bool,
}

impl FileContents {
    fn mark(&mut self, from: u64, to: u64) {
        if to > from {
            self.dirty.extend(from / PAGE..=(to - 1) / PAGE);
        }
    }

    fn resize(&mut self, len: u64) {
        let old = self.bytes.len() as u64;
        if old != len {
            self.mark(old.min(len), old.max(len));
            self.bytes.resize(len as usize, 0);
            self.resized = true;
        }
    }
}

struct Inode {
    contents: Contents,
    perm: u16,
    /// Folder entries naming this inode.
    links: u32,
    /// Open handles; an unlinked file's bytes go once the last one closes.
    opened: u32,
    modified: SystemTime,
}

impl Inode {
    fn new(contents: Contents, perm: u16) -> Inode {
        Inode {
            contents,
            perm,
            links: 1,
            opened: 0,
            modified: SystemTime::now(),
        }
    }

    fn kind(&self) -> Kind {
        match self.contents {
            Contents::File(_) => Kind::File,
            Contents::Folder(_) => Kind::Folder,
            Contents::Socket => Kind::Socket,
        }
    }

    fn is_dir(&self) -> bool {
        self.kind() == Kind::Folder
    }
}

/// A volume: its volatile view in memory over its durable folder.
pub struct Volume {
    durable_dir: PathBuf,
    inodes: HashMap<u64, Inode>,
    next_inode: u64,
    namespace: Namespace,
}

impl Volume {
    /// Opens the volume kept in `durable_dir` (created empty if new): the
    /// files as they were at the last syncs, and nothing else. Data files
    /// of inodes no synced folder names are deleted.
    pub fn open(durable_dir: &Path) -> Result<Volume, FsError> {
        let data_dir = durable_dir.join(DATA_DIR);
        fs::create_dir_all(&data_dir).map_err(|e| io("create", &data_dir, e))?;
        let namespace_path = durable_dir.join(NAMESPACE_FILE);
        let namespace: Namespace = match fs::read(&namespace_path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| FsError::Io(format!("{}: {e}", namespace_path.display())))?,
            Err(e) if e.kind() == ErrorKind::NotFound => Namespace::default(),
            Err(e) => return Err(io("read", &namespace_path, e)),
        };
        let mut volume = Volume {
            durable_dir: durable_dir.to_path_buf(),
            inodes: HashMap::new(),
            next_inode: namespace.next_inode.max(ROOT + 1),
            namespace: Namespace::default(),
        };
        volume
            .inodes
            .insert(ROOT, Inode::new(Contents::Folder(BTreeMap::new()), 0o755));
        // Walk from the root: only what a synced folder names exists.
        let mut pending = vec![ROOT];
        while let Some(folder) = pending.pop() {
            let entries = namespace.folders.get(&folder).cloned().unwrap_or_default();
            for inode in entries.values() {
                let Some(kind) = namespace.inodes.get(inode) else {
                    continue;
                };
                if let Some(existing) = volume.inodes.get_mut(inode) {
                    existing.links += 1;
                    continue;
                }
                let contents = match kind.kind {
                    Kind::Folder => {
                        pending.push(*inode);
                        Contents::empty(Kind::Folder)
                    }
                    Kind::File => Contents::File(FileContents {
                        bytes: volume.read_durable(*inode)?,
                        ..FileContents::default()
                    }),
                    Kind::Socket => Contents::Socket,
                };
                volume
                    .inodes
                    .insert(*inode, Inode::new(contents, kind.perm));
                volume.next_inode = volume.next_inode.max(inode + 1);
            }
            let live: BTreeMap<String, u64> = entries
                .into_iter()
                .filter(|(_, inode)| namespace.inodes.contains_key(inode))
                .collect();
            if let Some(Inode {
                contents: Contents::Folder(f),
                ..
            }) = volume.inodes.get_mut(&folder)
            {
                *f = live;
            }
        }
        volume.namespace = namespace;
        volume.collect_unnamed_data()?;
        Ok(volume)
    }

    fn data_path(&self, inode: u64) -> PathBuf {
        self.durable_dir.join(DATA_DIR).join(inode.to_string())
    }

    fn read_durable(&self, inode: u64) -> Result<Vec<u8>, FsError> {
        let path = self.data_path(inode);
        let mut bytes = Vec::new();
        match File::open(&path) {
            Ok(mut f) => {
                f.read_to_end(&mut bytes)
                    .map_err(|e| io("read", &path, e))?;
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(io("open", &path, e)),
        }
        Ok(bytes)
    }

    fn collect_unnamed_data(&mut self) -> Result<(), FsError> {
        let data_dir = self.durable_dir.join(DATA_DIR);
        for entry in fs::read_dir(&data_dir).map_err(|e| io("list", &data_dir, e))? {
            let entry = entry.map_err(|e| io("list", &data_dir, e))?;
            let inode = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u64>().ok());
            match inode {
                Some(inode) if self.inodes.contains_key(&inode) => {}
                _ => fs::remove_file(entry.path()).map_err(|e| io("remove", &entry.path(), e))?,
            }
        }
        Ok(())
    }

    fn inode(&self, inode: u64) -> Result<&Inode, FsError> {
        self.inodes.get(&inode).ok_or(FsError::NotFound)
    }

    fn inode_mut(&mut self, inode: u64) -> Result<&mut Inode, FsError> {
        self.inodes.get_mut(&inode).ok_or(FsError::NotFound)
    }

    fn folder(&self, inode: u64) -> Result<&BTreeMap<String, u64>, FsError> {
        match &self.inode(inode)?.contents {
            Contents::Folder(entries) => Ok(entries),
            _ => Err(FsError::NotADirectory),
        }
    }

    fn folder_mut(&mut self, inode: u64) -> Result<&mut BTreeMap<String, u64>, FsError> {
        match &mut self.inode_mut(inode)?.contents {
            Contents::Folder(entries) => Ok(entries),
            _ => Err(FsError::NotADirectory),
        }
    }

    fn file_mut(&mut self, inode: u64) -> Result<&mut FileContents, FsError> {
        match &mut self.inode_mut(inode)?.contents {
            Contents::File(file) => Ok(file),
            Contents::Folder(_) => Err(FsError::IsADirectory),
            Contents::Socket => Err(FsError::Invalid),
        }
    }

    /// `stat` of an inode.
    pub fn attributes(&self, inode: u64) -> Result<Attributes, FsError> {
        let node = self.inode(inode)?;
        let size = match &node.contents {
            Contents::File(f) => f.bytes.len() as u64,
            Contents::Folder(entries) => entries.len() as u64,
            Contents::Socket => 0,
        };
        Ok(Attributes {
            inode,
            kind: node.kind(),
            size,
            perm: node.perm,
            links: node.links,
            modified: node.modified,
        })
    }

    /// The inode `name` names in `folder`.
    pub fn lookup(&self, folder: u64, name: &str) -> Result<Attributes, FsError> {
        let inode = *self.folder(folder)?.get(name).ok_or(FsError::NotFound)?;
        self.attributes(inode)
    }

    /// Creates an empty file, folder or socket `name` in `folder`.
    pub fn create(
        &mut self,
        folder: u64,
        name: &str,
        kind: Kind,
        perm: u16,
    ) -> Result<Attributes, FsError> {
        if name.is_empty() || name.contains('/') {
            return Err(FsError::Invalid);
        }
        if self.folder(folder)?.contains_key(name) {
            return Err(FsError::Exists);
        }
        let inode = self.next_inode;
        self.next_inode += 1;
        self.inodes
            .insert(inode, Inode::new(Contents::empty(kind), perm));
        self.folder_mut(folder)?.insert(name.to_string(), inode);
        self.touch(folder);
        self.attributes(inode)
    }

    fn touch(&mut self, inode: u64) {
        if let Some(node) = self.inodes.get_mut(&inode) {
            node.modified = SystemTime::now();
        }
    }

    /// Drops one link of `inode`, and its bytes once nothing names or holds it.
    fn unlinked(&mut self, inode: u64) {
        if let Some(node) = self.inodes.get_mut(&inode) {
            node.links = node.links.saturating_sub(1);
            if node.links == 0 && node.opened == 0 {
                self.inodes.remove(&inode);
            }
        }
    }

    /// Removes the file `name` from `folder`.
    pub fn unlink(&mut self, folder: u64, name: &str) -> Result<(), FsError> {
        let inode = *self.folder(folder)?.get(name).ok_or(FsError::NotFound)?;
        if self.inode(inode)?.is_dir() {
            return Err(FsError::IsADirectory);
        }
        self.folder_mut(folder)?.remove(name);
        self.touch(folder);
        self.unlinked(inode);
        Ok(())
    }

    /// Removes the empty folder `name` from `folder`.
    pub fn rmdir(&mut self, folder: u64, name: &str) -> Result<(), FsError> {
        let inode = *self.folder(folder)?.get(name).ok_or(FsError::NotFound)?;
        if !self.folder(inode)?.is_empty() {
            return Err(FsError::NotEmpty);
        }
        self.folder_mut(folder)?.remove(name);
        self.touch(folder);
        self.unlinked(inode);
        Ok(())
    }

    /// Moves `name` of `from` to `to_name` of `to`, replacing a file there
    /// (or an empty folder, when moving a folder) unless `no_replace`.
    pub fn rename(
        &mut self,
        from: u64,
        name: &str,
        to: u64,
        to_name: &str,
        no_replace: bool,
    ) -> Result<(), FsError> {
        if to_name.is_empty() || to_name.contains('/') {
            return Err(FsError::Invalid);
        }
        let moving = *self.folder(from)?.get(name).ok_or(FsError::NotFound)?;
        let moving_dir = self.inode(moving)?.is_dir();
        if moving_dir && self.is_within(to, moving) {
            return Err(FsError::Invalid);
        }
        if let Some(&replaced) = self.folder(to)?.get(to_name) {
            if replaced == moving {
                return Ok(());
            }
            if no_replace {
                return Err(FsError::Exists);
            }
            match (moving_dir, self.inode(replaced)?.is_dir()) {
                (false, true) => return Err(FsError::IsADirectory),
                (true, false) => return Err(FsError::NotADirectory),
                (true, true) if !self.folder(replaced)?.is_empty() => {
                    return Err(FsError::NotEmpty)
                }
                _ => {}
            }
            self.unlinked(replaced);
        }
        self.folder_mut(from)?.remove(name);
        self.folder_mut(to)?.insert(to_name.to_string(), moving);
        self.touch(from);
        self.touch(to);
        Ok(())
    }

    /// Whether `inode` is `ancestor` or lies below it.
    fn is_within(&self, inode: u64, ancestor: u64) -> bool {
        if inode == ancestor {
            return true;
        }
        let Ok(entries) = self.folder(ancestor) else {
            return false;
        };
        entries.values().any(|&child| self.is_within(inode, child))
    }

    /// The entries of `folder`, by name.
    pub fn entries(&self, folder: u64) -> Result<Vec<Entry>, FsError> {
        let entries = self.folder(folder)?;
        Ok(entries
            .iter()
            .map(|(name, &inode)| Entry {
                name: name.clone(),
                inode,
                kind: self.inodes.get(&inode).map_or(Kind::File, Inode::kind),
            })
            .collect())
    }

    /// Notes a new open handle of `inode`.
    pub fn opened(&mut self, inode: u64) -> Result<(), FsError> {
        self.inode_mut(inode)?.opened += 1;
        Ok(())
    }

    /// Notes that a handle of `inode` closed.
    pub fn released(&mut self, inode: u64) {
        if let Some(node) = self.inodes.get_mut(&inode) {
            node.opened = node.opened.saturating_sub(1);
            if node.links == 0 && node.opened == 0 {
                self.inodes.remove(&inode);
            }
        }
    }

    /// Up to `len` bytes of `inode` from `offset`.
    pub fn read(&self, inode: u64, offset: u64, len: usize) -> Result<&[u8], FsError> {
        match &self.inode(inode)?.contents {
            Contents::File(f) => {
                let start = (offset as usize).min(f.bytes.len());
                let end = start.saturating_add(len).min(f.bytes.len());
                Ok(&f.bytes[start..end])
            }
            Contents::Folder(_) => Err(FsError::IsADirectory),
            Contents::Socket => Err(FsError::Invalid),
        }
    }

    /// Writes `data` into `inode` at `offset`, growing it as needed.
    pub fn write(&mut self, inode: u64, offset: u64, data: &[u8]) -> Result<usize, FsError> {
        let file = self.file_mut(inode)?;
        let end = offset + data.len() as u64;
        if end > file.bytes.len() as u64 {
            file.resize(end);
        }
        file.bytes[offset as usize..end as usize].copy_from_slice(data);
        file.mark(offset, end);
        self.touch(inode);
        Ok(data.len())
    }

    /// Sets the length of `inode` (truncating or zero-extending).
    pub fn set_size(&mut self, inode: u64, len: u64) -> Result<(), FsError> {
        self.file_mut(inode)?.resize(len);
        self.touch(inode);
        Ok(())
    }

    /// Sets the permission bits of `inode`.
    pub fn set_perm(&mut self, inode: u64, perm: u16) -> Result<(), FsError> {
        self.inode_mut(inode)?.perm = perm & 0o7777;
        Ok(())
    }

    /// fsync of a file: its bytes and length become durable (not its name).
    pub fn sync_file(&mut self, inode: u64) -> Result<(), FsError> {
        let path = self.data_path(inode);
        let file = self.file_mut(inode)?;
        if file.dirty.is_empty() && !file.resized {
            return Ok(());
        }
        let out = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| io("open", &path, e))?;
        let len = file.bytes.len() as u64;
        out.set_len(len).map_err(|e| io("resize", &path, e))?;
        for &page in &file.dirty {
            let start = page * PAGE;
            if start >= len {
                break;
            }
            let end = (start + PAGE).min(len);
            out.write_all_at(&file.bytes[start as usize..end as usize], start)
                .map_err(|e| io("write", &path, e))?;
        }
        file.dirty.clear();
        file.resized = false;
        Ok(())
    }

    /// fsync of a folder: its entries become durable, each naming its
    /// inode with the bytes that inode last synced (none if never).
    pub fn sync_folder(&mut self, inode: u64) -> Result<(), FsError> {
        let entries = self.folder(inode)?.clone();
        for &child in entries.values() {
            let node = self.inode(child)?;
            let durable = DurableInode {
                kind: node.kind(),
                perm: node.perm,
            };
            self.namespace.inodes.insert(child, durable);
        }
        self.namespace.folders.insert(inode, entries);
        self.namespace.next_inode = self.next_inode;
        self.write_namespace()
    }

    fn write_namespace(&self) -> Result<(), FsError> {
        let path = self.durable_dir.join(NAMESPACE_FILE);
        let tmp = path.with_extension("tmp");
        let json = serde_json::to_vec(&self.namespace).map_err(|e| FsError::Io(e.to_string()))?;
        fs::write(&tmp, json).map_err(|e| io("write", &tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| io("rename", &tmp, e))
    }

    /// Bytes held by the volatile view (for `statfs`).
    pub fn used_bytes(&self) -> u64 {
        self.inodes
            .values()
            .map(|node| match &node.contents {
                Contents::File(f) => f.bytes.len() as u64,
                _ => 0,
            })
            .sum()
    }

    /// Inodes in use (for `statfs`).
    pub fn inode_count(&self) -> u64 {
        self.inodes.len() as u64
    }
}

#[cfg(test)]
mod tests;
