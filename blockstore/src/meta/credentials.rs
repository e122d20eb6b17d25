//! Secrets meta starts with: the root user and its S3 access key, and the admin
//! token. Each comes from the configuration when given, else is generated once
//! and saved (mode 0600) in the data folder so that a restart keeps it.

use super::api::MetaError;
use super::buckets::require_bucket;
use super::service::Inner;
use super::service::{MetaConfig, RootCredentials};
use super::store::BUCKETS;
use super::store::{all_json, encode, get_json, Store, ACCESS_KEYS, USERS};
use super::types::{AccessKeyRecord, BucketGrant, BucketRight, UnixMillis, UserRecord};
use rand::Rng;
use redb::WriteTransaction;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Name of the user that may reach every bucket.
pub const ROOT_USER: &str = "root";
/// File (in the data folder) holding generated root credentials.
pub const ROOT_CREDENTIALS_FILE: &str = "root-credentials";
/// File (in the data folder) holding a generated admin token.
pub const ADMIN_TOKEN_FILE: &str = "admin-token";
/// File (in the data folder) holding a generated cluster token.
pub const CLUSTER_TOKEN_FILE: &str = "cluster-token";

const ACCESS_KEY_VAR: &str = "TESSERA_ROOT_ACCESS_KEY";
const SECRET_KEY_VAR: &str = "TESSERA_ROOT_SECRET_KEY";

const ACCESS_KEY_ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const SECRET_KEY_ALPHABET: &[u8] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn random_string(alphabet: &[u8], len: usize) -> String {
    let mut rng = rand::thread_rng();
    (0..len)
        .map(|_| alphabet[rng.gen_range(0..alphabet.len())] as char)
        .collect()
}

/// A new access key id: 20 uppercase letters and digits, like AWS's.
pub fn generate_access_key() -> String {
    random_string(ACCESS_KEY_ALPHABET, 20)
}

/// A new secret key: 40 characters of the base64 alphabet, like AWS's.
pub fn generate_secret_key() -> String {
    random_string(SECRET_KEY_ALPHABET, 40)
}

fn generate_admin_token() -> String {
    let bytes: [u8; 32] = rand::thread_rng().gen();
    hex::encode(bytes)
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> MetaError {
    MetaError::Store(format!("{what} {}: {e}", path.display()))
}

/// Writes `contents` to `path` readable by the owner only, atomically
/// (temporary file, fsync, rename).
fn write_private(path: &Path, contents: &str) -> Result<(), MetaError> {
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| io_error("creating", &tmp, e))?;
    // `mode` applies only to a new file; a leftover temporary file keeps its own.
    std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .map_err(|e| io_error("securing", &tmp, e))?;
    file.write_all(contents.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| io_error("writing", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| io_error("renaming", &tmp, e))?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_error("syncing", dir, e))?;
    }
    Ok(())
}

/// Reads a file that may be absent.
fn read_optional(path: &Path) -> Result<Option<String>, MetaError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error("reading", path, e)),
    }
}

/// The (access key, secret key) of a root credentials file.
fn parse_root_credentials(text: &str) -> Option<(String, String)> {
    let value = |var: &str| {
        text.lines()
            .filter_map(|line| line.trim().split_once('='))
            .find(|(name, _)| name.trim() == var)
            .map(|(_, v)| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    Some((value(ACCESS_KEY_VAR)?, value(SECRET_KEY_VAR)?))
}

fn format_root_credentials(access_key: &str, secret_key: &str) -> String {
    format!(
        "# Tessera root S3 credentials, generated on first start.\n\
         {ACCESS_KEY_VAR}={access_key}\n{SECRET_KEY_VAR}={secret_key}\n"
    )
}

/// Creates the root user, or marks it root again if it lost the flag.
fn ensure_root_user(txn: &WriteTransaction, now: UnixMillis) -> Result<(), MetaError> {
    let mut users = txn.open_table(USERS)?;
    let existing: Option<UserRecord> = get_json(&users, ROOT_USER)?;
    let record = match existing {
        Some(user) if user.is_root => return Ok(()),
        Some(user) => UserRecord {
            is_root: true,
            ..user
        },
        None => UserRecord {
            name: ROOT_USER.to_string(),
            created: now,
            is_root: true,
        },
    };
    users.insert(ROOT_USER, encode(&record)?.as_slice())?;
    Ok(())
}

fn validate_given_key(name: &str, value: &str) -> Result<(), MetaError> {
    if value.is_empty() || value.len() > 128 || !value.chars().all(|c| c.is_ascii_graphic()) {
        return Err(MetaError::InvalidRequest(format!(
            "{name} must be 1 to 128 printable ASCII characters"
        )));
    }
    Ok(())
}

/// Makes sure the root user and a root access key exist, and returns the key.
pub(super) fn bootstrap_root(
    store: &Store,
    config: &MetaConfig,
    now: UnixMillis,
) -> Result<RootCredentials, MetaError> {
    let file = config.data_dir.join(ROOT_CREDENTIALS_FILE);
    match (&config.root_access_key, &config.root_secret_key) {
        (Some(access_key), Some(secret_key)) => {
            validate_given_key("the root access key", access_key)?;
            validate_given_key("the root secret key", secret_key)?;
            store.write(|txn| {
                ensure_root_user(txn, now)?;
                let mut keys = txn.open_table(ACCESS_KEYS)?;
                let existing: Option<AccessKeyRecord> = get_json(&keys, access_key.as_str())?;
                let created = existing.map_or(now, |k| k.created);
                let record = AccessKeyRecord {
                    access_key: access_key.clone(),
                    secret_key: secret_key.clone(),
                    user: ROOT_USER.to_string(),
                    created,
                    bucket_grants: None,
                };
                keys.insert(access_key.as_str(), encode(&record)?.as_slice())?;
                Ok(())
            })?;
            Ok(RootCredentials {
                access_key: access_key.clone(),
                secret_key: secret_key.clone(),
                generated: false,
            })
        }
        (None, None) => {
            let saved = read_optional(&file)?;
            let saved = match saved {
                Some(text) => Some(parse_root_credentials(&text).ok_or_else(|| {
                    MetaError::Store(format!("corrupt credentials file {}", file.display()))
                })?),
                None => None,
            };
            store.write(|txn| {
                ensure_root_user(txn, now)?;
                let mut keys = txn.open_table(ACCESS_KEYS)?;
                if let Some((access_key, _)) = &saved {
                    let record: Option<AccessKeyRecord> = get_json(&keys, access_key.as_str())?;
                    if let Some(record) = record.filter(|k| k.user == ROOT_USER) {
                        return Ok(credentials_of(record, false));
                    }
                }
                let mut root_keys: Vec<AccessKeyRecord> = all_json::<&str, AccessKeyRecord>(&keys)?
                    .into_iter()
                    .filter(|k| k.user == ROOT_USER)
                    .collect();
                root_keys.sort_by_key(|k| k.created);
                if let Some(record) = root_keys.into_iter().next() {
                    return Ok(credentials_of(record, false));
                }
                let record = AccessKeyRecord {
                    access_key: generate_access_key(),
                    secret_key: generate_secret_key(),
                    user: ROOT_USER.to_string(),
                    created: now,
                    bucket_grants: None,
                };
                keys.insert(record.access_key.as_str(), encode(&record)?.as_slice())?;
                // Saved before the commit: a crash in between leaves a file whose
                // key is not in the store, which the next start replaces.
                write_private(
                    &file,
                    &format_root_credentials(&record.access_key, &record.secret_key),
                )?;
                tracing::info!(path = %file.display(), "generated root credentials");
                Ok(credentials_of(record, true))
            })
        }
        _ => Err(MetaError::InvalidRequest(
            "give both the root access key and the root secret key, or neither".into(),
        )),
    }
}

fn credentials_of(record: AccessKeyRecord, generated: bool) -> RootCredentials {
    RootCredentials {
        access_key: record.access_key,
        secret_key: record.secret_key,
        generated,
    }
}

/// The admin token: from the configuration, else the saved one, else a new one
/// saved now.
pub(super) fn admin_token(config: &MetaConfig) -> Result<String, MetaError> {
    saved_token(
        config,
        config.admin_token.as_ref(),
        ADMIN_TOKEN_FILE,
        "admin",
    )
}

/// The cluster token of meta RPC connections: from the configuration, else
/// the saved one, else a new one saved now.
pub(super) fn cluster_token(config: &MetaConfig) -> Result<String, MetaError> {
    saved_token(
        config,
        config.cluster_token.as_ref(),
        CLUSTER_TOKEN_FILE,
        "cluster",
    )
}

/// A token given in the configuration, else saved in `file_name`, else
/// generated and saved there.
fn saved_token(
    config: &MetaConfig,
    given: Option<&String>,
    file_name: &str,
    what: &str,
) -> Result<String, MetaError> {
    if let Some(token) = given {
        if token.trim().is_empty() {
            return Err(MetaError::InvalidRequest(format!(
                "the {what} token is empty"
            )));
        }
        return Ok(token.clone());
    }
    let file = config.data_dir.join(file_name);
    if let Some(text) = read_optional(&file)? {
        let token = text.trim();
        if token.is_empty() {
            return Err(MetaError::Store(format!(
                "{what} token file {} is empty",
                file.display()
            )));
        }
        return Ok(token.to_string());
    }
    let token = generate_admin_token();
    write_private(&file, &format!("{token}\n"))?;
    tracing::info!(path = %file.display(), "generated {what} token");
    Ok(token)
}

impl Inner {
    /// Limits `access_key` to `grants` (None: no limit). Each bucket must exist.
    pub(super) fn limit_key(
        &self,
        access_key: &str,
        grants: Option<Vec<BucketGrant>>,
    ) -> Result<(), MetaError> {
        self.store.write(|txn| {
            let buckets = txn.open_table(BUCKETS)?;
            for grant in grants.iter().flatten() {
                require_bucket(&buckets, &grant.bucket)?;
            }
            let mut keys = txn.open_table(ACCESS_KEYS)?;
            let mut record: AccessKeyRecord = get_json(&keys, access_key)?
                .ok_or_else(|| MetaError::NoSuchAccessKey(access_key.to_string()))?;
            record.bucket_grants = grants;
            keys.insert(access_key, encode(&record)?.as_slice())?;
            Ok(())
        })?;
        tracing::info!(access_key, "access key limits changed");
        Ok(())
    }
}

/// The right a key with `grants` (its `bucket_grants`) has in `bucket`: None
/// when the key is limited to other buckets, ReadWrite when it is not limited.
pub fn key_right(grants: Option<&[BucketGrant]>, bucket: &str) -> Option<BucketRight> {
    match grants {
        None => Some(BucketRight::ReadWrite),
        Some(grants) => grants.iter().find(|g| g.bucket == bucket).map(|g| g.right),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limited_keys_reach_only_their_buckets() {
        let mut key = AccessKeyRecord {
            access_key: "AK".into(),
            secret_key: "s".into(),
            user: "u".into(),
            created: 0,
            bucket_grants: None,
        };
        assert_eq!(
            key_right(key.bucket_grants.as_deref(), "any"),
            Some(BucketRight::ReadWrite)
        );
        key.bucket_grants = Some(vec![BucketGrant {
            bucket: "photos".into(),
            right: BucketRight::Read,
        }]);
        assert_eq!(
            key_right(key.bucket_grants.as_deref(), "photos"),
            Some(BucketRight::Read)
        );
        assert_eq!(key_right(key.bucket_grants.as_deref(), "other"), None);
    }

    #[test]
    fn generated_keys_have_the_aws_shape() {
        let a = generate_access_key();
        assert_eq!(a.len(), 20);
        assert!(a.bytes().all(|b| ACCESS_KEY_ALPHABET.contains(&b)));
        let s = generate_secret_key();
        assert_eq!(s.len(), 40);
        assert!(s.bytes().all(|b| SECRET_KEY_ALPHABET.contains(&b)));
        assert_ne!(generate_access_key(), a);
    }

    #[test]
    fn credentials_file_round_trips() {
        let text = format_root_credentials("AKIAEXAMPLE", "abc+/def");
        assert_eq!(
            parse_root_credentials(&text),
            Some(("AKIAEXAMPLE".to_string(), "abc+/def".to_string()))
        );
        assert_eq!(parse_root_credentials("# nothing\n"), None);
    }

    #[test]
    fn private_files_are_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        write_private(&path, "x").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "x");
    }
}
