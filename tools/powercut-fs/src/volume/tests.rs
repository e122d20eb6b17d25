use super::*;

fn volume() -> (tempfile::TempDir, Volume) {
    let dir = tempfile::tempdir().unwrap();
    let volume = Volume::open(dir.path()).unwrap();
    (dir, volume)
}

/// The volume as the next boot after a power cut sees it (the volume
/// before it must not be used after: it is gone with the power).
fn after_power_cut(dir: &tempfile::TempDir) -> Volume {
    Volume::open(dir.path()).unwrap()
}

fn contents(volume: &Volume, path: &[&str]) -> Option<Vec<u8>> {
    let mut inode = ROOT;
    for name in path {
        inode = volume.lookup(inode, name).ok()?.inode;
    }
    let size = volume.attributes(inode).unwrap().size as usize;
    Some(volume.read(inode, 0, size).unwrap().to_vec())
}

#[test]
fn a_file_synced_in_a_synced_folder_survives() {
    let (dir, mut v) = volume();
    let f = v.create(ROOT, "f", Kind::File, 0o644).unwrap().inode;
    v.write(f, 0, b"hello world").unwrap();
    v.sync_file(f).unwrap();
    v.sync_folder(ROOT).unwrap();
    let v = after_power_cut(&dir);
    assert_eq!(contents(&v, &["f"]).unwrap(), b"hello world");
}

#[test]
fn a_synced_file_whose_folder_was_not_synced_is_lost() {
    let (dir, mut v) = volume();
    let f = v.create(ROOT, "f", Kind::File, 0o644).unwrap().inode;
    v.write(f, 0, b"data").unwrap();
    v.sync_file(f).unwrap();
    let v = after_power_cut(&dir);
    assert_eq!(contents(&v, &["f"]), None);
    // Its durable bytes are collected, not left behind.
    assert_eq!(fs::read_dir(dir.path().join(DATA_DIR)).unwrap().count(), 0);
}

#[test]
fn writes_after_the_last_file_sync_are_lost() {
    let (dir, mut v) = volume();
    let f = v.create(ROOT, "f", Kind::File, 0o644).unwrap().inode;
    v.write(f, 0, &[1u8; 10_000]).unwrap();
    v.sync_file(f).unwrap();
    v.sync_folder(ROOT).unwrap();
    v.write(f, 5000, &[2u8; 10_000]).unwrap();
    assert_eq!(v.attributes(f).unwrap().size, 15_000);
    let v = after_power_cut(&dir);
    assert_eq!(contents(&v, &["f"]).unwrap(), vec![1u8; 10_000]);
}

#[test]
fn a_named_file_never_synced_comes_back_empty() {
    let (dir, mut v) = volume();
    let f = v.create(ROOT, "f", Kind::File, 0o600).unwrap().inode;
    v.write(f, 0, b"unsynced").unwrap();
    v.sync_folder(ROOT).unwrap();
    let v = after_power_cut(&dir);
    assert_eq!(contents(&v, &["f"]).unwrap(), b"");
    assert_eq!(v.lookup(ROOT, "f").unwrap().perm, 0o600);
}

#[test]
fn a_rename_is_undone_unless_the_folder_is_synced() {
    let (dir, mut v) = volume();
    let f = v.create(ROOT, "tmp", Kind::File, 0o644).unwrap().inode;
    v.write(f, 0, b"v1").unwrap();
    v.sync_file(f).unwrap();
    v.sync_folder(ROOT).unwrap();
    v.rename(ROOT, "tmp", ROOT, "final", false).unwrap();
    let lost = after_power_cut(&dir);
    assert_eq!(contents(&lost, &["tmp"]).unwrap(), b"v1");
    assert_eq!(contents(&lost, &["final"]), None);
    v.sync_folder(ROOT).unwrap();
    let kept = after_power_cut(&dir);
    assert_eq!(contents(&kept, &["final"]).unwrap(), b"v1");
    assert_eq!(contents(&kept, &["tmp"]), None);
}

#[test]
fn a_rename_over_a_file_replaces_it_durably_once_synced() {
    let (dir, mut v) = volume();
    for (name, body) in [("a", b"old"), ("b", b"new")] {
        let f = v.create(ROOT, name, Kind::File, 0o644).unwrap().inode;
        v.write(f, 0, body).unwrap();
        v.sync_file(f).unwrap();
    }
    v.sync_folder(ROOT).unwrap();
    v.rename(ROOT, "b", ROOT, "a", false).unwrap();
    assert_eq!(v.rename(ROOT, "a", ROOT, "a", true), Ok(()));
    v.sync_folder(ROOT).unwrap();
    let v = after_power_cut(&dir);
    assert_eq!(contents(&v, &["a"]).unwrap(), b"new");
    assert_eq!(contents(&v, &["b"]), None);
}

#[test]
fn an_unlink_is_undone_unless_the_folder_is_synced() {
    let (dir, mut v) = volume();
    let f = v.create(ROOT, "f", Kind::File, 0o644).unwrap().inode;
    v.write(f, 0, b"keep").unwrap();
    v.sync_file(f).unwrap();
    v.sync_folder(ROOT).unwrap();
    v.unlink(ROOT, "f").unwrap();
    assert_eq!(v.lookup(ROOT, "f"), Err(FsError::NotFound));
    assert_eq!(contents(&after_power_cut(&dir), &["f"]).unwrap(), b"keep");
    v.sync_folder(ROOT).unwrap();
    assert_eq!(contents(&after_power_cut(&dir), &["f"]), None);
}

#[test]
fn a_nested_file_needs_every_folder_on_its_path_synced() {
    for sync_root in [false, true] {
        let (dir, mut v) = volume();
        let a = v.create(ROOT, "a", Kind::Folder, 0o755).unwrap().inode;
        let f = v.create(a, "f", Kind::File, 0o644).unwrap().inode;
        v.write(f, 0, b"deep").unwrap();
        v.sync_file(f).unwrap();
        v.sync_folder(a).unwrap();
        if sync_root {
            v.sync_folder(ROOT).unwrap();
        }
        let found = contents(&after_power_cut(&dir), &["a", "f"]);
        assert_eq!(
            found.as_deref(),
            sync_root.then_some(&b"deep"[..]),
            "root synced: {sync_root}"
        );
    }
}

#[test]
fn truncation_then_growth_syncs_zeros_not_old_bytes() {
    let (dir, mut v) = volume();
    let f = v.create(ROOT, "f", Kind::File, 0o644).unwrap().inode;
    v.write(f, 0, &[7u8; 3 * PAGE as usize]).unwrap();
    v.sync_file(f).unwrap();
    v.sync_folder(ROOT).unwrap();
    v.set_size(f, 0).unwrap();
    v.write(f, 2 * PAGE, b"x").unwrap();
    v.sync_file(f).unwrap();
    let mut expected = vec![0u8; 2 * PAGE as usize];
    expected.push(b'x');
    assert_eq!(contents(&after_power_cut(&dir), &["f"]).unwrap(), expected);
}

#[test]
fn new_inodes_after_a_power_cut_do_not_reuse_synced_ones() {
    let (dir, mut v) = volume();
    let first = v.create(ROOT, "f", Kind::File, 0o644).unwrap().inode;
    v.write(first, 0, b"synced").unwrap();
    v.sync_file(first).unwrap();
    v.sync_folder(ROOT).unwrap();
    let mut v = after_power_cut(&dir);
    let second = v.create(ROOT, "g", Kind::File, 0o644).unwrap().inode;
    assert_ne!(first, second);
    assert_eq!(contents(&v, &["f"]).unwrap(), b"synced");
    assert_eq!(contents(&v, &["g"]).unwrap(), b"");
}

#[test]
fn an_open_unlinked_file_stays_readable_until_released() {
    let (_dir, mut v) = volume();
    let f = v.create(ROOT, "f", Kind::File, 0o644).unwrap().inode;
    v.opened(f).unwrap();
    v.write(f, 0, b"held").unwrap();
    v.unlink(ROOT, "f").unwrap();
    assert_eq!(v.read(f, 0, 10).unwrap(), b"held");
    v.released(f);
    assert_eq!(v.read(f, 0, 10), Err(FsError::NotFound));
}

#[test]
fn folder_rules_match_posix() {
    let (_dir, mut v) = volume();
    let a = v.create(ROOT, "a", Kind::Folder, 0o755).unwrap().inode;
    v.create(a, "f", Kind::File, 0o644).unwrap();
    assert_eq!(v.create(ROOT, "a", Kind::File, 0o644), Err(FsError::Exists));
    assert_eq!(v.rmdir(ROOT, "a"), Err(FsError::NotEmpty));
    assert_eq!(v.unlink(ROOT, "a"), Err(FsError::IsADirectory));
    assert_eq!(
        v.rename(ROOT, "a", a, "inside", false),
        Err(FsError::Invalid)
    );
    assert_eq!(
        v.rename(a, "f", ROOT, "a", false),
        Err(FsError::IsADirectory)
    );
    let names: Vec<String> = v.entries(a).unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["f"]);
}
