//! Folders whose names survive a power cut.
//!
//! A file's fsync makes its bytes durable, not its name: the entry lives in
//! the folder, which needs an fsync of its own, and so on up the path for a
//! folder made now. Meta and the datanodes create their folders through
//! [`create_dir_all`] so that a store acknowledged once is still there after
//! the power goes (checked by the power-loss test on powercut-fs).

use std::fs::File;
use std::io;
use std::path::Path;

/// Fsyncs a folder, making the creations, renames and removals in it durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Creates `dir` and any missing parents, then fsyncs `dir` and each of
/// its ancestors, so that every name on the path is durable whether this
/// call or an earlier one (or another program) created it.
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let dir = std::path::absolute(dir)?;
    for folder in dir.ancestors() {
        sync_dir(folder)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_every_missing_folder_and_accepts_existing_ones() {
        let root = tempfile::tempdir().unwrap();
        let deep = root.path().join("a/b/c");
        create_dir_all(&deep).unwrap();
        assert!(deep.is_dir());
        create_dir_all(&deep).unwrap();
        let file = root.path().join("a/file");
        std::fs::write(&file, b"x").unwrap();
        assert!(create_dir_all(&file).is_err(), "a file is not a folder");
    }
}
