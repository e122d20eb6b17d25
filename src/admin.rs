//! `tessera admin`: users, access keys, buckets, cluster credentials, the
//! keys of the built-in KMS and cluster status, through meta's RPC with the admin token; credentials can
//! also be minted offline with meta's credential key file, and the cluster's
//! TLS certificates are made offline ([`certs`]).

mod balance;
mod certs;
mod human;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use meta_api::{
    AccessKeyRecord, BucketGrant, BucketRecord, BucketRight, ClusterStatus, CreateBucket,
    CreateKey, CreateKmsKey, CreateUser, DeleteBucket, DeleteKey, DeleteUser, GetClusterStatus,
    KmsKeyRecord, LimitKey, ListBuckets, ListKeys, ListKmsKeys, ListUsers, MetaClient,
    MintCredential, Principal, SetBucketPublicRead, SetUserPolicy, UserRecord,
};
use meta_api::{
    AddGroupMember, AdminState, Credential, CredentialKey, GetGroupStatus, RemoveGroupMember,
    SetDatanodeAdminState, TakeGroupSnapshot,
};
use proto::DatanodeId;
use proto::ReplicationConfig;
use serde_json::{json, Value};
use std::path::Path;
use std::path::PathBuf;

/// Flags of `tessera admin`.
#[derive(Args, Debug)]
pub struct AdminArgs {
    /// Address of meta's RPC (`tessera server` serves it on --meta-listen).
    /// These options go before or after the operation alike.
    #[arg(
        long,
        env = "TESSERA_META",
        default_value = "127.0.0.1:9879",
        global = true
    )]
    pub meta: String,
    /// Admin token; else read from --token-file.
    #[arg(
        long,
        env = "TESSERA_ADMIN_TOKEN",
        hide_env_values = true,
        global = true
    )]
    pub token: Option<String>,
    /// File holding the admin token that meta generated.
    #[arg(long, default_value = "./tessera-data/meta/admin-token", global = true)]
    pub token_file: PathBuf,
    /// Machine-readable JSON output.
    #[arg(long, global = true)]
    pub json: bool,
    /// Mutual TLS to meta, when the cluster runs it.
    #[command(flatten)]
    pub cluster_tls: crate::roles::ClusterTlsArgs,
    /// The admin operation to run.
    #[command(subcommand)]
    pub command: AdminCommand,
}

/// What to administer.
#[derive(Subcommand, Debug)]
pub enum AdminCommand {
    /// Users (each owns buckets and access keys).
    #[command(subcommand)]
    User(UserCommand),
    /// S3 access keys.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Buckets.
    #[command(subcommand)]
    Bucket(BucketCommand),
    /// Credentials of datanodes and gateways for meta's RPC, printed on
    /// stdout (or written to files).
    #[command(subcommand)]
    Credential(CredentialCommand),
    /// The cluster CA and certificates of its processes for mutual TLS on
    /// the internal links, written offline to a folder.
    Certs(certs::CertsArgs),
    /// Datanodes: decommission, maintenance.
    #[command(subcommand)]
    Datanode(DatanodeCommand),
    /// Datanodes and their state, location, capacity and use; block groups
    /// by redundancy, the repair queue, scrub progress, the balancer.
    Status,
    /// The balancer: moves block files until every datanode's use is
    /// within a threshold of the mean.
    #[command(subcommand)]
    Balance(balance::BalanceCommand),
    /// The built-in key service of SSE-KMS.
    #[command(subcommand)]
    Kms(KmsCommand),
    /// The meta group: its members, leader and progress; adding and
    /// removing members.
    #[command(subcommand)]
    Meta(MetaCommand),
}

/// `tessera admin meta ...`
#[derive(Subcommand, Debug)]
pub enum MetaCommand {
    /// What each address of --meta answers: its role, the leader it knows,
    /// the term, its last log and applied entries, the members.
    Status,
    /// Adds a member (started with --node-id ID and the group's --peers):
    /// it receives the log or a snapshot, then votes.
    Add {
        /// The new member's --node-id.
        id: u64,
        /// Its meta address (its --listen).
        addr: String,
    },
    /// Takes a snapshot of the leader's store now and drops the log behind
    /// it (members added later receive the snapshot).
    Snapshot,
    /// Removes a member; stop it afterwards. A member whose data folder was
    /// lost is removed, then started empty and added again.
    Remove {
        /// The member's --node-id.
        id: u64,
    },
}

/// `tessera admin kms ...`
#[derive(Subcommand, Debug)]
pub enum KmsCommand {
    /// Keys that seal the data keys of SSE-KMS objects.
    #[command(subcommand)]
    Key(KmsKeyCommand),
}

/// `tessera admin kms key ...`
#[derive(Subcommand, Debug)]
pub enum KmsKeyCommand {
    /// Makes a key, named in writes by its id, its ARN or `alias/NAME`.
    Create {
        /// The key's alias (letters, digits, '/', '_', '-').
        name: String,
    },
    /// Every key: id, alias, creation time.
    List,
}

/// `tessera admin datanode ...`
#[derive(Subcommand, Debug)]
pub enum DatanodeCommand {
    /// Copies every block file off the datanode (it gets no new ones), then
    /// marks it decommissioned: `status` shows when it can be stopped.
    Decommission {
        /// The datanode's id.
        id: String,
    },
    /// Takes the datanode out of service for a while (on) without its
    /// block files being rebuilt elsewhere while it is down, or puts it
    /// back in service (off; also ends a decommission).
    Maintenance {
        /// The datanode's id.
        id: String,
        #[arg(value_parser = ["on", "off"])]
        state: String,
    },
}

/// `tessera admin credential ...`
#[derive(Subcommand, Debug)]
pub enum CredentialCommand {
    /// A datanode's credential; it names the datanode's id, which a new
    /// datanode takes (an existing one must be given its own with --id).
    Datanode {
        /// The datanode's id (a uuid); a new one when omitted.
        #[arg(long)]
        id: Option<String>,
        #[command(flatten)]
        mint: MintArgs,
    },
    /// A gateway's credential (also what `tessera bench --via client` needs).
    Gateway {
        /// The gateway's name (letters, digits, '-', '_'), to rotate it alone.
        name: String,
        #[command(flatten)]
        mint: MintArgs,
    },
    /// Writes the credentials of a new cluster, minted offline with meta's
    /// key file (created when missing); files that exist are left as they
    /// are. docker-compose's `secrets` service runs this.
    Files {
        /// Meta's credential key file (`META_DATA/credential-key`).
        #[arg(long)]
        key_file: PathBuf,
        /// A file to hold a new datanode's credential, repeatable.
        #[arg(long = "datanode", value_name = "FILE")]
        datanodes: Vec<PathBuf>,
        /// `NAME=FILE`: a file to hold gateway NAME's credential, repeatable.
        #[arg(long = "gateway", value_name = "NAME=FILE")]
        gateways: Vec<String>,
        /// A file to hold the admin token (`META_DATA/admin-token`),
        /// repeatable: the members of a meta group share one token, so every
        /// file gets the token of the first that exists, else a new one.
        #[arg(long = "admin-token", value_name = "FILE")]
        admin_tokens: Vec<PathBuf>,
    },
}

/// How a credential is minted.
#[derive(Args, Debug)]
pub struct MintArgs {
    /// Mint the next generation: the holder's earlier credentials are
    /// refused from now on.
    #[arg(long, conflicts_with = "key_file")]
    pub rotate: bool,
    /// Mint offline with meta's credential key file instead of asking meta
    /// (generation 0, so before any rotation).
    #[arg(long)]
    pub key_file: Option<PathBuf>,
}

/// `tessera admin user ...`
#[derive(Subcommand, Debug)]
pub enum UserCommand {
    /// Creates a user with a first access key, printed once.
    Create {
        name: String,
    },
    List,
    /// Deletes a user that owns no bucket, with its keys.
    Delete {
        name: String,
    },
    /// Gives a user a policy (IAM JSON, no Principal): the user may then do
    /// only what it allows, in any bucket; `--clear` removes it.
    Policy {
        name: String,
        /// The policy document.
        #[arg(required_unless_present = "clear")]
        file: Option<std::path::PathBuf>,
        /// Remove the user's policy.
        #[arg(long, conflicts_with = "file")]
        clear: bool,
    },
}

/// `tessera admin key ...`
#[derive(Subcommand, Debug)]
pub enum KeyCommand {
    /// Creates another access key for a user.
    Create {
        user: String,
        /// Limit the key to these buckets: `NAME:read` or `NAME:rw`, repeatable.
        #[arg(long = "limit", value_name = "BUCKET:RIGHT")]
        limits: Vec<BucketGrantArg>,
    },
    /// Limits a key to some buckets (`--bucket NAME:read|rw`, repeatable), or
    /// lifts its limit (`--unlimited`).
    Limit {
        access_key: String,
        #[arg(
            long = "bucket",
            value_name = "BUCKET:RIGHT",
            required_unless_present = "unlimited"
        )]
        buckets: Vec<BucketGrantArg>,
        #[arg(long, conflicts_with = "buckets")]
        unlimited: bool,
    },
    List {
        #[arg(long)]
        user: Option<String>,
    },
    Delete {
        access_key: String,
    },
}

/// `tessera admin bucket ...`
#[derive(Subcommand, Debug)]
pub enum BucketCommand {
    Create {
        name: String,
        #[arg(long, default_value = "root")]
        owner: String,
        /// Default replication of the bucket's new objects.
        #[arg(long)]
        replication: Option<ReplicationConfig>,
    },
    List,
    /// Deletes an empty bucket.
    Delete {
        name: String,
    },
    /// Lets anonymous callers GET/HEAD the bucket's objects and list it (on), or not (off).
    PublicRead {
        name: String,
        #[arg(value_parser = ["on", "off"])]
        state: String,
    },
}

/// `NAME:read` or `NAME:rw` on the command line.
#[derive(Clone, Debug)]
pub struct BucketGrantArg(pub BucketGrant);

impl std::str::FromStr for BucketGrantArg {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (bucket, right) = text
            .rsplit_once(':')
            .ok_or_else(|| format!("expected BUCKET:read or BUCKET:rw, got {text:?}"))?;
        let right = match right {
            "read" | "r" | "ro" => BucketRight::Read,
            "rw" | "read-write" | "write" => BucketRight::ReadWrite,
            other => return Err(format!("unknown right {other:?}: use read or rw")),
        };
        if bucket.is_empty() {
            return Err("empty bucket name".to_string());
        }
        Ok(Self(BucketGrant {
            bucket: bucket.to_string(),
            right,
        }))
    }
}

fn grants(args: &[BucketGrantArg]) -> Vec<BucketGrant> {
    args.iter().map(|g| g.0.clone()).collect()
}

fn token(args: &AdminArgs) -> Result<String> {
    if let Some(t) = &args.token {
        return Ok(t.clone());
    }
    let text = std::fs::read_to_string(&args.token_file).with_context(|| {
        format!(
            "no --token or TESSERA_ADMIN_TOKEN, and cannot read {}",
            args.token_file.display()
        )
    })?;
    Ok(text.trim().to_string())
}

/// Runs one admin command and prints its result.
pub async fn run(args: AdminArgs) -> Result<()> {
    if let AdminCommand::Certs(certs) = &args.command {
        return print_value(args.json, &certs::run(certs)?);
    }
    if let AdminCommand::Credential(command) = &args.command {
        if mint_offline(command)? {
            return Ok(());
        }
    }
    let token = token(&args)?;
    // The admin token opens the connection with the admin role.
    let meta = MetaClient::remote(&args.meta, &token, args.cluster_tls.load()?);
    let done = json!({"ok": true});
    let value = match &args.command {
        AdminCommand::User(UserCommand::Create { name }) => {
            meta.call(CreateUser { name: name.clone() }).await?;
            key_json(&meta.call(CreateKey { user: name.clone() }).await?)
        }
        AdminCommand::User(UserCommand::List) => users_json(&meta.call(ListUsers).await?),
        AdminCommand::User(UserCommand::Delete { name }) => {
            meta.call(DeleteUser { name: name.clone() }).await?;
            done
        }
        AdminCommand::User(UserCommand::Policy { name, file, .. }) => {
            let policy = match file {
                Some(path) => {
                    let text = std::fs::read_to_string(path)
                        .with_context(|| format!("reading {}", path.display()))?;
                    access::Policy::parse_user(&text)
                        .with_context(|| format!("{} is not a user policy", path.display()))?;
                    Some(text)
                }
                None => None,
            };
            let set = SetUserPolicy {
                name: name.clone(),
                policy,
            };
            meta.call(set).await?;
            done
        }
        AdminCommand::Key(KeyCommand::Create { user, limits }) => {
            let created = meta.call(CreateKey { user: user.clone() }).await?;
            if !limits.is_empty() {
                let limit = LimitKey {
                    access_key: created.access_key.clone(),
                    grants: Some(grants(limits)),
                };
                meta.call(limit).await?;
            }
            key_json(&created)
        }
        AdminCommand::Key(KeyCommand::Limit {
            access_key,
            buckets,
            unlimited,
        }) => {
            let limit = LimitKey {
                access_key: access_key.clone(),
                grants: (!unlimited).then(|| grants(buckets)),
            };
            meta.call(limit).await?;
            done
        }
        AdminCommand::Key(KeyCommand::List { user }) => {
            keys_json(&meta.call(ListKeys { user: user.clone() }).await?)
        }
        AdminCommand::Key(KeyCommand::Delete { access_key }) => {
            let access_key = access_key.clone();
            meta.call(DeleteKey { access_key }).await?;
            done
        }
        AdminCommand::Bucket(BucketCommand::Create {
            name,
            owner,
            replication,
        }) => {
            let create = CreateBucket {
                object_lock: false,
                name: name.clone(),
                owner: owner.clone(),
                replication: *replication,
                access: Default::default(),
            };
            meta.call(create).await?;
            done
        }
        AdminCommand::Bucket(BucketCommand::List) => {
            buckets_json(&meta.call(ListBuckets { owner: None }).await?)
        }
        AdminCommand::Bucket(BucketCommand::Delete { name }) => {
            meta.call(DeleteBucket { name: name.clone() }).await?;
            done
        }
        AdminCommand::Bucket(BucketCommand::PublicRead { name, state }) => {
            let set = SetBucketPublicRead {
                name: name.clone(),
                public_read: state == "on",
            };
            meta.call(set).await?;
            done
        }
        AdminCommand::Credential(command) => {
            let (principal, mint) = credential_request(command)?;
            let mint = MintCredential {
                principal: principal.clone(),
                rotate: mint.rotate,
            };
            let credential = meta.call(mint).await?;
            if !args.json {
                println!("{credential}");
                return Ok(());
            }
            json!({"principal": principal.to_string(), "credential": credential})
        }
        AdminCommand::Datanode(command) => {
            let (id, state) = match command {
                DatanodeCommand::Decommission { id } => (id, AdminState::Decommissioning),
                DatanodeCommand::Maintenance { id, state } if state == "on" => {
                    (id, AdminState::Maintenance)
                }
                DatanodeCommand::Maintenance { id, .. } => (id, AdminState::InService),
            };
            let set = SetDatanodeAdminState {
                datanode: DatanodeId(id.clone()),
                state,
            };
            meta.call(set).await?;
            done
        }
        AdminCommand::Status => status_json(&meta.call(GetClusterStatus).await?),
        AdminCommand::Balance(command) => {
            let value = balance::run(&meta, command).await?;
            if matches!(command, balance::BalanceCommand::Status) && !args.json {
                balance::print_status(&value);
                return Ok(());
            }
            value
        }
        AdminCommand::Kms(KmsCommand::Key(KmsKeyCommand::Create { name })) => {
            let created = meta
                .call(CreateKmsKey {
                    alias: name.clone(),
                })
                .await?;
            kms_keys_json(std::slice::from_ref(&created))[0].clone()
        }
        AdminCommand::Kms(KmsCommand::Key(KmsKeyCommand::List)) => {
            kms_keys_json(&meta.call(ListKmsKeys).await?)
        }
        AdminCommand::Meta(MetaCommand::Status) => {
            let tls = args.cluster_tls.load()?;
            let mut members = Vec::new();
            for addr in args
                .meta
                .split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty())
            {
                let member = MetaClient::remote(addr, &token, tls.clone());
                members.push(match member.call(GetGroupStatus).await {
                    Ok(status) => json!({"addr": addr, "status": status}),
                    Err(e) => json!({"addr": addr, "error": e.to_string()}),
                });
            }
            Value::Array(members)
        }
        AdminCommand::Meta(MetaCommand::Add { id, addr }) => {
            meta.call(AddGroupMember {
                id: *id,
                addr: addr.clone(),
            })
            .await?;
            done
        }
        AdminCommand::Meta(MetaCommand::Snapshot) => {
            json!({"snapshot": meta.call(TakeGroupSnapshot).await?})
        }
        AdminCommand::Meta(MetaCommand::Remove { id }) => {
            meta.call(RemoveGroupMember { id: *id }).await?;
            done
        }
        AdminCommand::Certs(_) => unreachable!("made offline above"),
    };
    print_value(args.json, &value)
}

fn print_value(json: bool, value: &Value) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(value)?);
    } else {
        print_human(value);
    }
    Ok(())
}

/// Whom a datanode or gateway command names, and how to mint.
fn credential_request(command: &CredentialCommand) -> Result<(Principal, &MintArgs)> {
    match command {
        CredentialCommand::Datanode { id, mint } => {
            let id = match id {
                Some(id) => uuid::Uuid::parse_str(id)
                    .with_context(|| format!("datanode id {id:?} is not a uuid"))?,
                None => uuid::Uuid::new_v4(),
            };
            Ok((Principal::Datanode(DatanodeId(id.to_string())), mint))
        }
        CredentialCommand::Gateway { name, mint } => Ok((Principal::Gateway(name.clone()), mint)),
        CredentialCommand::Files { .. } => {
            anyhow::bail!("`credential files` mints offline only")
        }
    }
}

/// Mints without meta when the command says so (a key file), printing or
/// writing the credentials; false when meta must mint.
fn mint_offline(command: &CredentialCommand) -> Result<bool> {
    if let CredentialCommand::Files {
        key_file,
        datanodes,
        gateways,
        admin_tokens,
    } = command
    {
        write_shared_admin_token(admin_tokens)?;
        let key = ::meta::load_or_create_credential_key(key_file)?;
        for file in datanodes {
            let principal = Principal::Datanode(DatanodeId(uuid::Uuid::new_v4().to_string()));
            write_new_credential(&key, principal, file)?;
        }
        for gateway in gateways {
            let (name, file) = gateway
                .split_once('=')
                .with_context(|| format!("--gateway {gateway:?}: expected NAME=FILE"))?;
            write_new_credential(&key, Principal::Gateway(name.into()), Path::new(file))?;
        }
        return Ok(true);
    }
    let (principal, mint) = credential_request(command)?;
    let Some(key_file) = &mint.key_file else {
        return Ok(false);
    };
    let key = ::meta::load_or_create_credential_key(key_file)?;
    println!("{}", Credential::mint(&key, principal, 0)?);
    Ok(true)
}

/// Writes one admin token to each of `files` that does not exist yet: the
/// token of the first that exists, else a new one.
fn write_shared_admin_token(files: &[PathBuf]) -> Result<()> {
    let existing = files.iter().find_map(|f| std::fs::read_to_string(f).ok());
    let token = match existing {
        Some(text) => text.trim().to_string(),
        None => ::meta::generate_admin_token(),
    };
    for file in files {
        if write_new_file(file, format!("{token}\n").as_bytes(), 0o600)? {
            eprintln!("admin token written to {}", file.display());
        }
    }
    Ok(())
}

/// Writes `principal`'s credential to `file` (mode 0600) unless the file exists.
fn write_new_credential(key: &CredentialKey, principal: Principal, file: &Path) -> Result<()> {
    let credential = Credential::mint(key, principal, 0)?;
    if write_new_file(file, format!("{credential}\n").as_bytes(), 0o600)? {
        eprintln!("{} written to {}", credential.principal, file.display());
    }
    Ok(())
}

/// Creates `file` with `mode` and `contents`, synced; false (and nothing
/// written) when it exists already.
fn write_new_file(file: &Path, contents: &[u8], mode: u32) -> Result<bool> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(file);
    let mut out = match created {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
        Err(e) => return Err(e).with_context(|| format!("creating {}", file.display())),
    };
    out.write_all(contents)
        .and_then(|()| out.sync_all())
        .with_context(|| format!("writing {}", file.display()))?;
    Ok(true)
}

fn key_json(k: &AccessKeyRecord) -> Value {
    json!({"user": k.user, "access_key": k.access_key, "secret_key": k.secret_key})
}

fn users_json(users: &[UserRecord]) -> Value {
    users
        .iter()
        .map(|u| json!({"name": u.name, "root": u.is_root, "created": u.created}))
        .collect()
}

fn keys_json(keys: &[AccessKeyRecord]) -> Value {
    keys.iter()
        .map(|k| {
            json!({
                "user": k.user, "access_key": k.access_key, "created": k.created,
                "buckets": k.bucket_grants,
            })
        })
        .collect()
}

fn kms_keys_json(keys: &[KmsKeyRecord]) -> Value {
    keys.iter()
        .map(|k| json!({"id": k.id, "alias": format!("alias/{}", k.alias), "created": k.created}))
        .collect()
}

fn buckets_json(buckets: &[BucketRecord]) -> Value {
    buckets
        .iter()
        .map(|b| {
            json!({
                "name": b.name, "owner": b.owner, "created": b.created,
                "replication": b.replication.map(|r| r.to_string()),
                "public_read": b.public_read,
            })
        })
        .collect()
}

fn status_json(status: &ClusterStatus) -> Value {
    json!({
        "datanodes": status.datanodes.iter().map(|d| json!({
            "id": d.id.0, "address": d.addr, "location": d.location.as_str(),
            "state": format!("{:?}", d.state).to_lowercase(),
            "admin": admin_state_name(d.admin),
            "capacity": d.capacity, "used": d.used, "garbage": d.garbage, "blocks": d.blocks,
            "last_heartbeat": d.last_heartbeat,
            "scrub": {
                "passes": d.scrub.passes, "checked_bytes": d.scrub.checked_bytes,
                "pass_bytes": d.scrub.pass_bytes, "last_pass_end": d.scrub.last_pass_end,
                "damaged": d.scrub.damaged,
            },
            "disks": d.disks.iter().map(|disk| json!({
                "path": disk.path, "blocks": disk.blocks, "used": disk.used,
                "available": disk.available, "failed": disk.failed,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "buckets": status.buckets,
        "objects": status.objects,
        "pending_deletions": status.pending_deletions,
        "block_groups": {
            // Counts hold once a redundancy scan ran since meta started
            // (seconds after a start); groups written since are counted
            // as they commit.
            "counted": status.redundancy.last_scan > 0,
            "healthy": status.redundancy.healthy,
            "degraded": status.redundancy.degraded,
            "at_risk": status.redundancy.at_risk,
            "lost": status.redundancy.lost,
            "misplaced": status.redundancy.misplaced,
        },
        "repair": {
            "queued": status.redundancy.queued,
            "running": status.redundancy.running,
            "repaired_bytes": status.redundancy.repaired_bytes,
            "last_scan": status.redundancy.last_scan,
        },
        "lifecycle": {
            "running": status.lifecycle.running,
            "last": status.lifecycle.last,
        },
        "balance": balance::status_json(&status.balance),
    })
}

fn admin_state_name(state: AdminState) -> &'static str {
    match state {
        AdminState::InService => "in-service",
        AdminState::Decommissioning => "decommissioning",
        AdminState::Decommissioned => "decommissioned",
        AdminState::Maintenance => "maintenance",
    }
}

fn print_human(value: &Value) {
    match value {
        Value::Array(rows) => {
            for row in rows {
                print_human(row);
            }
        }
        Value::Object(map) => {
            if let Some(Value::Array(nodes)) = map.get("datanodes") {
                println!(
                    "{:<38} {:<22} {:<24} {:<8} {:<15} {:>14} {:>14} {:>12} {:>8} {:>7} {:>7}",
                    "DATANODE",
                    "ADDRESS",
                    "LOCATION",
                    "STATE",
                    "ADMIN",
                    "CAPACITY",
                    "USED",
                    "GARBAGE",
                    "BLOCKS",
                    "SCRUB",
                    "DAMAGED"
                );
                for n in nodes {
                    let scrub = &n["scrub"];
                    let done = scrub["checked_bytes"].as_u64().unwrap_or(0) as f64;
                    let all = scrub["pass_bytes"].as_u64().unwrap_or(0).max(1) as f64;
                    println!(
                        "{:<38} {:<22} {:<24} {:<8} {:<15} {:>14} {:>14} {:>12} {:>8} {:>6.0}% {:>7}",
                        n["id"].as_str().unwrap_or(""),
                        n["address"].as_str().unwrap_or(""),
                        n["location"].as_str().unwrap_or(""),
                        n["state"].as_str().unwrap_or(""),
                        n["admin"].as_str().unwrap_or(""),
                        human::bytes(&n["capacity"]),
                        human::bytes(&n["used"]),
                        human::bytes(&n["garbage"]),
                        n["blocks"],
                        (100.0 * done / all).min(100.0),
                        scrub["damaged"]
                    );
                    for disk in n["disks"].as_array().into_iter().flatten() {
                        let health = match disk["failed"].as_str() {
                            Some(reason) => format!("FAILED: {reason}"),
                            None => "serving".to_string(),
                        };
                        println!(
                            "  disk {}  used {}  available {}  blocks {}  {health}",
                            disk["path"].as_str().unwrap_or(""),
                            human::bytes(&disk["used"]),
                            human::bytes(&disk["available"]),
                            disk["blocks"]
                        );
                    }
                }
                println!(
                    "buckets {}  objects {}  pending deletions {}",
                    map["buckets"], map["objects"], map["pending_deletions"]
                );
                let groups = &map["block_groups"];
                let repair = &map["repair"];
                if groups["counted"] == true {
                    println!(
                        "block groups: healthy {}  degraded {}  at risk {}  lost {}  misplaced {}",
                        groups["healthy"],
                        groups["degraded"],
                        groups["at_risk"],
                        groups["lost"],
                        groups["misplaced"]
                    );
                } else {
                    println!("block groups: not counted yet (meta's first scan runs seconds after it starts)");
                }
                println!(
                    "repair: queued {}  running {}  repaired {}  last scan {}",
                    repair["queued"],
                    repair["running"],
                    human::bytes(&repair["repaired_bytes"]),
                    human::instant(&repair["last_scan"])
                );
                let balance = &map["balance"];
                println!(
                    "balancer: {}  queued {}  moved {} ({})",
                    balance["state"].as_str().unwrap_or(""),
                    balance["queued"],
                    balance["moved"],
                    human::bytes(&balance["moved_bytes"])
                );
                let lifecycle = &map["lifecycle"];
                for (name, pass) in [
                    ("running", &lifecycle["running"]),
                    ("last", &lifecycle["last"]),
                ] {
                    if pass.is_object() {
                        println!(
                            "lifecycle pass ({name}): examined {}  expired {}  removed {}  aborted {}  locked {}",
                            pass["examined"], pass["expired"], pass["removed"], pass["aborted"], pass["locked"]
                        );
                    }
                }
                return;
            }
            let fields: Vec<String> = map.iter().map(|(k, v)| human::field(k, v)).collect();
            println!("{}", fields.join("  "));
        }
        other => println!("{other}"),
    }
}
