//! The kernel's side: each FUSE request turned into one call on the
//! [`Volume`].
//!
//! Attributes and entries are given with a zero time to live, so the kernel
//! asks for every lookup and no stale view outlives a change.

use crate::volume::{Attributes, FsError, Kind, Volume, ROOT};
use fuser::{
    AccessFlags, BsdFileFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags,
    Generation, INodeNo, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request,
    TimeOrNow, WriteFlags,
};
use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

const TTL: Duration = Duration::ZERO;

/// What `statfs` reports as the volume's size unless told otherwise.
pub const DEFAULT_CAPACITY: u64 = 64 << 30;
const BLOCK: u32 = 4096;

/// A [`Volume`] served over FUSE.
pub struct PowercutFs {
    volume: Mutex<Volume>,
    /// Once this file exists, every operation fails with EIO: the disk
    /// has died (for tests of a failing disk).
    fail_when: Option<PathBuf>,
    /// What `statfs` reports as the volume's size.
    capacity: u64,
}

impl PowercutFs {
    pub fn new(volume: Volume) -> PowercutFs {
        PowercutFs {
            volume: Mutex::new(volume),
            fail_when: None,
            capacity: DEFAULT_CAPACITY,
        }
    }

    /// Fails every operation with EIO from the moment `path` exists.
    pub fn failing_when(mut self, path: PathBuf) -> PowercutFs {
        self.fail_when = Some(path);
        self
    }

    /// Reports `bytes` as the volume's size.
    pub fn with_capacity(mut self, bytes: u64) -> PowercutFs {
        self.capacity = bytes;
        self
    }

    fn failed(&self) -> bool {
        self.fail_when.as_ref().is_some_and(|path| path.exists())
    }

    fn with<T>(&self, f: impl FnOnce(&mut Volume) -> Result<T, FsError>) -> Result<T, Errno> {
        if self.failed() {
            return Err(Errno::EIO);
        }
        let mut volume = self.volume.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut volume).map_err(|e| {
            if let FsError::Io(reason) = &e {
                eprintln!("powercut-fs: {reason}");
            }
            Errno::from_i32(e.errno())
        })
    }
}

fn name(name: &OsStr) -> Result<&str, FsError> {
    name.to_str().ok_or(FsError::Invalid)
}

fn file_attr(a: &Attributes) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.inode),
        size: a.size,
        blocks: a.size.div_ceil(512),
        atime: a.modified,
        mtime: a.modified,
        ctime: a.modified,
        crtime: SystemTime::UNIX_EPOCH,
        kind: file_type(a.kind),
        perm: a.perm,
        nlink: a.links.max(1),
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: BLOCK,
        flags: 0,
    }
}

fn file_type(kind: Kind) -> FileType {
    match kind {
        Kind::File => FileType::RegularFile,
        Kind::Folder => FileType::Directory,
        Kind::Socket => FileType::Socket,
    }
}

fn reply_entry(reply: ReplyEntry, result: Result<Attributes, Errno>) {
    match result {
        Ok(a) => reply.entry(&TTL, &file_attr(&a), Generation(0)),
        Err(e) => reply.error(e),
    }
}

fn reply_empty(reply: ReplyEmpty, result: Result<(), Errno>) {
    match result {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

impl Filesystem for PowercutFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Datanodes write cells of up to 1 MiB; fewer, larger writes.
        let _ = config.set_max_write(1 << 20);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, child: &OsStr, reply: ReplyEntry) {
        reply_entry(reply, self.with(|v| v.lookup(parent.0, name(child)?)));
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.with(|v| v.attributes(ino.0)) {
            Ok(a) => reply.attr(&TTL, &file_attr(&a)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let result = self.with(|v| {
            if let Some(size) = size {
                v.set_size(ino.0, size)?;
            }
            if let Some(mode) = mode {
                v.set_perm(ino.0, mode as u16)?;
            }
            v.attributes(ino.0)
        });
        match result {
            Ok(a) => reply.attr(&TTL, &file_attr(&a)),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        child: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        let kind = match mode & libc::S_IFMT {
            libc::S_IFREG => Kind::File,
            libc::S_IFSOCK => Kind::Socket,
            _ => return reply.error(Errno::EPERM),
        };
        let perm = (mode & !umask & 0o7777) as u16;
        reply_entry(
            reply,
            self.with(|v| v.create(parent.0, name(child)?, kind, perm)),
        );
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        child: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let perm = (mode & !umask & 0o7777) as u16;
        reply_entry(
            reply,
            self.with(|v| v.create(parent.0, name(child)?, Kind::Folder, perm)),
        );
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, child: &OsStr, reply: ReplyEmpty) {
        reply_empty(reply, self.with(|v| v.unlink(parent.0, name(child)?)));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, child: &OsStr, reply: ReplyEmpty) {
        reply_empty(reply, self.with(|v| v.rmdir(parent.0, name(child)?)));
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        child: &OsStr,
        new_parent: INodeNo,
        new_name: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if flags.intersects(RenameFlags::RENAME_EXCHANGE | RenameFlags::RENAME_WHITEOUT) {
            return reply.error(Errno::EINVAL);
        }
        let no_replace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        reply_empty(
            reply,
            self.with(|v| {
                v.rename(
                    parent.0,
                    name(child)?,
                    new_parent.0,
                    name(new_name)?,
                    no_replace,
                )
            }),
        );
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.with(|v| v.opened(ino.0)) {
            Ok(()) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        child: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let perm = (mode & !umask & 0o7777) as u16;
        let created = self.with(|v| {
            let a = v.create(parent.0, name(child)?, Kind::File, perm)?;
            v.opened(a.inode)?;
            Ok(a)
        });
        match created {
            Ok(a) => reply.created(
                &TTL,
                &file_attr(&a),
                Generation(0),
                FileHandle(0),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if self.failed() {
            return reply.error(Errno::EIO);
        }
        let volume = self.volume.lock().unwrap_or_else(|e| e.into_inner());
        match volume.read(ino.0, offset, size as usize) {
            Ok(bytes) => reply.data(bytes),
            Err(e) => reply.error(Errno::from_i32(e.errno())),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.with(|v| v.write(ino.0, offset, data)) {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        reply_empty(
            reply,
            self.with(|v| {
                v.released(ino.0);
                Ok(())
            }),
        );
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply_empty(reply, self.with(|v| v.sync_file(ino.0)));
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let entries = match self.with(|v| v.entries(ino.0)) {
            Ok(entries) => entries,
            Err(e) => return reply.error(e),
        };
        let dots = [(ino.0, Kind::Folder, "."), (ROOT, Kind::Folder, "..")];
        let all = dots
            .into_iter()
            .chain(entries.iter().map(|e| (e.inode, e.kind, e.name.as_str())));
        for (i, (inode, kind, entry_name)) in all.enumerate().skip(offset as usize) {
            if reply.add(INodeNo(inode), (i + 1) as u64, file_type(kind), entry_name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply_empty(reply, self.with(|v| v.sync_folder(ino.0)));
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let (used, inodes) = match self.with(|v| Ok((v.used_bytes(), v.inode_count()))) {
            Ok(counts) => counts,
            Err(e) => return reply.error(e),
        };
        let blocks = self.capacity / u64::from(BLOCK);
        let free = blocks.saturating_sub(used.div_ceil(u64::from(BLOCK)));
        reply.statfs(
            blocks,
            free,
            free,
            1 << 20,
            (1 << 20) - inodes,
            BLOCK,
            255,
            BLOCK,
        );
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if mode & !libc::FALLOC_FL_KEEP_SIZE != 0 {
            return reply.error(Errno::EOPNOTSUPP);
        }
        let grow = mode & libc::FALLOC_FL_KEEP_SIZE == 0;
        reply_empty(
            reply,
            self.with(|v| {
                let size = v.attributes(ino.0)?.size;
                if grow && offset + length > size {
                    v.set_size(ino.0, offset + length)?;
                }
                Ok(())
            }),
        );
    }
}
