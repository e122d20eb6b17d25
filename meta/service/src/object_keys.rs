//! The data keys of encrypted bodies (SSE-S3): a gateway's commit hands
//! meta the body's data key, which meta seals under its master key before
//! the record is stored; meta opens it again for every read it answers.
//! The master key lives in a file of its own in meta's data folder (mode
//! 0600), generated at first start; losing it loses every encrypted body.

use crate::credentials::saved_secret;
use crate::store::db::StoreError;
use meta_api::{Encryption, MetaError, ObjectAttributes};
use sse::{DataKey, KeyEncryptionKey};
use std::path::Path;

/// The master key's file in meta's data folder.
pub const MASTER_KEY_FILE: &str = "sse-master-key";

/// Binds a sealed key to its use.
const CONTEXT: &[u8] = b"tessera sse-s3 v1";

/// The master key saved in `dir`, else a new one saved there now.
pub(crate) fn load_master_key(dir: &Path) -> Result<KeyEncryptionKey, StoreError> {
    let file = dir.join(MASTER_KEY_FILE);
    let text = saved_secret(&file, "encryption master key", || {
        let key = KeyEncryptionKey::random().expect("the system has random bytes");
        key.to_hex().to_string()
    })?;
    KeyEncryptionKey::from_hex(&text).map_err(|_| {
        StoreError::Corrupt(format!(
            "{} does not hold a master key (64 hex digits)",
            file.display()
        ))
    })
}

fn data_key(encryption: &Encryption) -> Result<DataKey, MetaError> {
    let hex = encryption
        .data_key
        .as_deref()
        .ok_or_else(|| MetaError::InvalidRequest("an encrypted body needs its data key".into()))?;
    let bytes = hex::decode(hex)
        .map_err(|_| MetaError::InvalidRequest("a data key is 64 hex digits".into()))?;
    DataKey::from_bytes(&bytes)
        .map_err(|_| MetaError::InvalidRequest("a data key is 32 bytes".into()))
}

/// Seals the data key a commit carries, so that only the sealed key is
/// stored.
pub(crate) fn seal_for_store(
    master: &KeyEncryptionKey,
    attributes: &mut ObjectAttributes,
) -> Result<(), MetaError> {
    let Some(encryption) = attributes.encryption.as_mut() else {
        return Ok(());
    };
    let key = data_key(encryption)?;
    let sealed = master
        .seal(&key, CONTEXT)
        .map_err(|e| MetaError::Store(format!("sealing a data key: {e}")))?;
    encryption.sealed_key = hex::encode(sealed);
    encryption.data_key = None;
    Ok(())
}

/// Opens the stored data key for a gateway's read.
pub(crate) fn open_for_reading(
    master: &KeyEncryptionKey,
    attributes: &mut ObjectAttributes,
) -> Result<(), StoreError> {
    let Some(encryption) = attributes.encryption.as_mut() else {
        return Ok(());
    };
    let sealed = hex::decode(&encryption.sealed_key)
        .map_err(|_| StoreError::Corrupt("a sealed data key is not hex".into()))?;
    let key = master.open(&sealed, CONTEXT).map_err(|_| {
        StoreError::Corrupt("a data key does not open with this meta's master key".into())
    })?;
    encryption.data_key = Some(hex::encode(key.as_bytes()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use meta_api::EncryptionMode;

    #[test]
    fn only_the_sealed_key_is_stored_and_it_opens_again() {
        let dir = tempfile::tempdir().unwrap();
        let master = load_master_key(dir.path()).unwrap();
        let again = load_master_key(dir.path()).unwrap();
        assert_eq!(master.to_hex(), again.to_hex(), "saved once, read back");
        let key = DataKey::random().unwrap();
        let mut attributes = ObjectAttributes {
            encryption: Some(Encryption {
                mode: EncryptionMode::S3,
                sealed_key: String::new(),
                data_key: Some(hex::encode(key.as_bytes())),
            }),
            ..Default::default()
        };
        seal_for_store(&master, &mut attributes).unwrap();
        let stored = serde_json::to_string(&attributes).unwrap();
        assert!(!stored.contains(&hex::encode(key.as_bytes())));
        assert!(!stored.contains("data_key"));
        open_for_reading(&master, &mut attributes).unwrap();
        let opened = attributes.encryption.as_ref().unwrap().data_key.clone();
        assert_eq!(opened, Some(hex::encode(key.as_bytes())));
        let other = KeyEncryptionKey::random().unwrap();
        assert!(open_for_reading(&other, &mut attributes).is_err());
        let mut keyless = ObjectAttributes {
            encryption: Some(Encryption {
                mode: EncryptionMode::S3,
                sealed_key: String::new(),
                data_key: None,
            }),
            ..Default::default()
        };
        assert!(seal_for_store(&master, &mut keyless).is_err());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(MASTER_KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "the master key file is private");
        }
    }
}
