//! `powercut-fs --durable DIR --mount DIR`: mounts the volume kept in
//! `--durable` and prints `READY mount=DIR` once mounted. SIGKILL it to cut
//! the power, then unmount (`umount -l DIR`) and start it again to boot.
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
    let session = match Session::new(PowercutFs::new(volume), &args.mount, &config) {
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
