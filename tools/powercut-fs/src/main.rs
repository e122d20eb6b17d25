//! `powercut-fs --durable DIR --mount DIR [--fail-when FILE]`: mounts the
//! volume kept in `--durable` and prints `READY mount=DIR` once mounted.
//! SIGKILL it to cut the power, then unmount (`umount -l DIR`) and start it
//! again to boot. With `--fail-when`, creating FILE kills the disk: every
//! operation fails with EIO from then on.
#![forbid(unsafe_code)]

use clap::Parser;
use fuser::{Config, MountOption, Session};
use powercut_fs::fuse::PowercutFs;
use powercut_fs::volume::Volume;
use std::io::Write;
use std::path::PathBuf;

#[derive(Parser)]
#[command(about = "A FUSE filesystem that keeps only what was fsynced")]
struct Args {
    /// Folder on a real disk that holds what the volume synced.
    #[arg(long)]
    durable: PathBuf,
    /// Where to mount the volume.
    #[arg(long)]
    mount: PathBuf,
    /// Once this file exists, every operation fails with EIO: the disk has
    /// died (tests of a failing disk).
    #[arg(long)]
    fail_when: Option<PathBuf>,
    /// Size in bytes `statfs` reports.
    #[arg(long, default_value_t = powercut_fs::fuse::DEFAULT_CAPACITY)]
    capacity: u64,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let volume = match Volume::open(&args.durable) {
        Ok(volume) => volume,
        Err(e) => {
            eprintln!("powercut-fs: opening {}: {e:?}", args.durable.display());
            return std::process::ExitCode::FAILURE;
        }
    };
    let mut config = Config::default();
    config.mount_options = vec![MountOption::FSName("powercut".into()), MountOption::RW];
    config.n_threads = Some(2);
    let mut fs = PowercutFs::new(volume).with_capacity(args.capacity);
    if let Some(path) = args.fail_when {
        fs = fs.failing_when(path);
    }
    let session = match Session::new(fs, &args.mount, &config) {
        Ok(session) => session,
        Err(e) => {
            eprintln!("powercut-fs: mounting on {}: {e}", args.mount.display());
            return std::process::ExitCode::FAILURE;
        }
    };
    println!("READY mount={}", args.mount.display());
    let _ = std::io::stdout().flush();
    if let Err(e) = session.run() {
        eprintln!("powercut-fs: {e}");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}
