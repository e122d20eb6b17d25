//! Data folders whose names survive a power cut and that only their owner
//! can read.
//!
//! A file's fsync makes its bytes durable, not its name: the entry lives in
//! the folder, which needs an fsync of its own, and so on up the path for a
//! folder made now. Meta and the datanodes create their folders through
//! [`create_private_dir`] so that a store acknowledged once is still there
//! after the power goes (checked by the power-loss test on powercut-fs), and
//! so that block files, the database and the saved secrets inside are out
//! of other local users' reach (mode 0700, whatever the folder had before).

use std::fs::File;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Fsyncs a folder, making the creations, renames and removals in it durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Creates `dir` and any missing parents, makes `dir` its owner's alone
/// (0700), then fsyncs `dir` and each of its ancestors, so that every name
/// on the path is durable whether this call or an earlier one (or another
/// program) created it.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    let dir = std::path::absolute(dir)?;
    for folder in dir.ancestors() {
        sync_dir(folder)?;
    }
    Ok(())
}

/// Bytes still free for unprivileged use in the file system holding `path`
/// (statvfs `f_bavail * f_frsize`): what a data folder can still fill.
pub fn available_space(path: &Path) -> io::Result<u64> {
    let stat = rustix::fs::statvfs(path)?;
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_every_missing_folder_and_accepts_existing_ones() {
        let root = tempfile::tempdir().unwrap();
        let deep = root.path().join("a/b/c");
        create_private_dir(&deep).unwrap();
        assert!(deep.is_dir());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&deep), 0o700);
        std::fs::set_permissions(&deep, std::fs::Permissions::from_mode(0o755)).unwrap();
        create_private_dir(&deep).unwrap();
        assert_eq!(mode(&deep), 0o700, "an existing folder is made private too");
        let file = root.path().join("a/file");
        std::fs::write(&file, b"x").unwrap();
        assert!(create_private_dir(&file).is_err(), "a file is not a folder");
    }
}
