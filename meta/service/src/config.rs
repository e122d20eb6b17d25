//! Settings of the metadata service, and the clock it reads (see
//! [`crate::clock`]).

pub use crate::clock::Clock;
use crate::repair::RepairSettings;
use crate::store::group_commit::Commits;
use meta_api::lifecycle::LifecycleDay;
use proto::DEFAULT_BLOCK_SIZE;
use std::path::PathBuf;
use std::time::Duration;

/// Default [`MetaConfig::deletion_delay`]: longer than any read of one piece
/// of a block takes, so a GET streaming an object that is being replaced
/// finishes.
pub const DEFAULT_DELETION_DELAY: Duration = Duration::from_secs(60);

/// Default [`MetaConfig::token_rotation`]: a new block token key a day.
pub const DEFAULT_TOKEN_ROTATION: Duration = Duration::from_secs(24 * 3600);
/// Default [`MetaConfig::token_lifetime`], as HDFS's: longer than any single
/// PUT or GET of one object takes.
pub const DEFAULT_TOKEN_LIFETIME: Duration = Duration::from_secs(10 * 3600);

/// Settings of the metadata service.
#[derive(Clone)]
pub struct MetaConfig {
    /// Folder of `meta.redb` and of generated secrets.
    pub data_dir: PathBuf,
    /// A datanode silent this long gets no new blocks.
    pub stale_after: Duration,
    /// A datanode silent this long is reported dead.
    pub dead_after: Duration,
    /// Token for admin operations; generated and saved when None.
    pub admin_token: Option<String>,
    /// Root S3 access key; used only together with `root_secret_key`.
    pub root_access_key: Option<String>,
    /// Root S3 secret key; used only together with `root_access_key`.
    pub root_secret_key: Option<String>,
    /// Size of one block file; a datanode needs this much free space to get a block.
    pub block_size: u64,
    /// How long the blocks of an overwritten or deleted object stay on their
    /// datanodes, so that reads already streaming the old object can finish.
    pub deletion_delay: Duration,
    /// Orphan block files (written, never committed) are deleted only when
    /// allocated and written longer ago than this: writes must commit within it.
    pub orphan_grace: Duration,
    /// How often a new block token signing key takes over.
    pub token_rotation: Duration,
    /// How long a block token stays valid after meta signs it.
    pub token_lifetime: Duration,
    /// Limits on the repair of groups that lost block files.
    pub repair: RepairSettings,
    /// The lifecycle worker's day and batch size.
    pub lifecycle: LifecycleSettings,
    /// Where meta reads the time: the system clock, or one a test moves.
    pub clock: Clock,
    /// Whether concurrent writes share one fsync (the default).
    pub commits: Commits,
}

impl MetaConfig {
    /// Defaults for a data folder: stale after [`DEFAULT_STALE_AFTER`], dead
    /// after [`DEFAULT_DEAD_AFTER`], generated secrets, 256 MiB blocks,
    /// released blocks deleted after [`DEFAULT_DELETION_DELAY`].
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            stale_after: DEFAULT_STALE_AFTER,
            dead_after: DEFAULT_DEAD_AFTER,
            admin_token: None,
            root_access_key: None,
            root_secret_key: None,
            block_size: DEFAULT_BLOCK_SIZE,
            deletion_delay: DEFAULT_DELETION_DELAY,
            orphan_grace: DEFAULT_ORPHAN_GRACE,
            token_rotation: DEFAULT_TOKEN_ROTATION,
            token_lifetime: DEFAULT_TOKEN_LIFETIME,
            repair: RepairSettings::default(),
            lifecycle: LifecycleSettings::default(),
            clock: Clock::System,
            commits: Commits::Grouped,
        }
    }
}

impl std::fmt::Debug for MetaConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redacted = |s: &Option<String>| s.as_ref().map(|_| "<redacted>");
        f.debug_struct("MetaConfig")
            .field("data_dir", &self.data_dir)
            .field("stale_after", &self.stale_after)
            .field("dead_after", &self.dead_after)
            .field("admin_token", &redacted(&self.admin_token))
            .field("root_access_key", &self.root_access_key)
            .field("root_secret_key", &redacted(&self.root_secret_key))
            .field("block_size", &self.block_size)
            .field("deletion_delay", &self.deletion_delay)
            .field("orphan_grace", &self.orphan_grace)
            .field("token_rotation", &self.token_rotation)
            .field("token_lifetime", &self.token_lifetime)
            .field("repair", &self.repair)
            .field("lifecycle", &self.lifecycle)
            .field("clock", &self.clock)
            .field("commits", &self.commits)
            .finish()
    }
}

/// Default [`MetaConfig::stale_after`]: five missed heartbeats at the
/// datanodes' default interval of 3 s.
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(15);

/// Default [`MetaConfig::dead_after`].
pub const DEFAULT_DEAD_AFTER: Duration = Duration::from_secs(60);

/// Default [`MetaConfig::orphan_grace`]: a write must commit within an hour.
pub const DEFAULT_ORPHAN_GRACE: Duration = Duration::from_secs(3600);

/// Default [`LifecycleSettings::batch`].
pub const DEFAULT_LIFECYCLE_BATCH: usize = 1000;

/// How the lifecycle worker runs.
#[derive(Clone, Copy, Debug)]
pub struct LifecycleSettings {
    /// The length of a day in the rules, and between the starts of passes.
    pub day: LifecycleDay,
    /// Most keys or uploads one batch (one transaction) looks at.
    pub batch: usize,
    /// Whether passes run on their own; off, only
    /// `MetaService::run_lifecycle_pass` and `step_lifecycle` run them
    /// (tests that move a manual clock).
    pub background: bool,
}

impl Default for LifecycleSettings {
    fn default() -> Self {
        Self {
            day: LifecycleDay::REAL,
            batch: DEFAULT_LIFECYCLE_BATCH,
            background: true,
        }
    }
}
