//! Data keys and their sealing under a key-encryption key.

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use aws_lc_rs::hkdf::{Salt, HKDF_SHA256};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use zeroize::Zeroizing;

/// Bytes of a data key or a key-encryption key.
pub const KEY_LEN: usize = 32;
/// Bytes of a sealed data key: nonce, the key, tag.
pub const SEALED_KEY_LEN: usize = NONCE_LEN + KEY_LEN + 16;

/// Why a key could not be made or opened.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    /// Not 32 bytes (or not 64 hex digits).
    #[error("a key is 32 bytes")]
    Length,
    /// The sealed key does not open under this key-encryption key and
    /// context: another key sealed it, or it was altered.
    #[error("the sealed data key does not open with this key")]
    WrongKey,
    /// The system's random source failed.
    #[error("no random bytes")]
    Random,
}

fn random_bytes<const N: usize>() -> Result<Zeroizing<[u8; N]>, KeyError> {
    let mut bytes = Zeroizing::new([0u8; N]);
    SystemRandom::new()
        .fill(bytes.as_mut())
        .map_err(|_| KeyError::Random)?;
    Ok(bytes)
}

/// The key one body is sealed with; wiped from memory when dropped.
#[derive(Clone)]
pub struct DataKey(Zeroizing<[u8; KEY_LEN]>);

impl DataKey {
    /// A fresh random key.
    pub fn random() -> Result<Self, KeyError> {
        random_bytes().map(Self)
    }

    /// The key of these 32 bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, KeyError> {
        let bytes: [u8; KEY_LEN] = bytes.try_into().map_err(|_| KeyError::Length)?;
        Ok(Self(Zeroizing::new(bytes)))
    }

    /// The key's bytes.
    pub fn as_bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }

    /// The key of one part of a multipart body: HKDF-SHA256 of this (the
    /// upload's) key with the part's own random `salt`, so every part, and
    /// every re-upload of a part, seals under a key of its own.
    pub fn derive(&self, salt: &[u8]) -> DataKey {
        let mut bytes = Zeroizing::new([0u8; KEY_LEN]);
        // Expanding fails only for outputs over 255 hash lengths; 32 bytes
        // is one.
        Salt::new(HKDF_SHA256, salt)
            .extract(self.as_bytes())
            .expand(&[b"tessera part key v1"], HKDF_SHA256)
            .and_then(|okm| okm.fill(bytes.as_mut()))
            .expect("32 bytes is one SHA-256 output");
        Self(bytes)
    }

    pub(crate) fn aead(&self) -> LessSafeKey {
        // Only the length can make this fail, and it is fixed.
        LessSafeKey::new(UnboundKey::new(&AES_256_GCM, self.as_bytes()).expect("a 32-byte key"))
    }
}

impl std::fmt::Debug for DataKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DataKey(<redacted>)")
    }
}

/// A key that seals data keys: meta's master key, a KMS key, or an SSE-C
/// client's key.
#[derive(Clone)]
pub struct KeyEncryptionKey(DataKey);

impl KeyEncryptionKey {
    /// A fresh random key.
    pub fn random() -> Result<Self, KeyError> {
        DataKey::random().map(Self)
    }

    /// The key of these 32 bytes (an SSE-C key as the client sent it).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, KeyError> {
        DataKey::from_bytes(bytes).map(Self)
    }

    /// The key written as 64 hex digits (how key files hold it).
    pub fn from_hex(text: &str) -> Result<Self, KeyError> {
        let bytes = Zeroizing::new(hex::decode(text.trim()).map_err(|_| KeyError::Length)?);
        Self::from_bytes(&bytes)
    }

    /// The key as 64 hex digits.
    pub fn to_hex(&self) -> Zeroizing<String> {
        Zeroizing::new(hex::encode(self.0.as_bytes()))
    }

    /// `key` sealed under this key, bound to `context` (which must be given
    /// again to open it): a random nonce, the sealed key and its tag.
    pub fn seal(&self, key: &DataKey, context: &[u8]) -> Result<Vec<u8>, KeyError> {
        let nonce = random_bytes::<NONCE_LEN>()?;
        let mut out = Vec::with_capacity(SEALED_KEY_LEN);
        out.extend_from_slice(nonce.as_ref());
        out.extend_from_slice(key.as_bytes());
        let tag = self
            .0
            .aead()
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(*nonce),
                Aad::from(context),
                &mut out[NONCE_LEN..],
            )
            .map_err(|_| KeyError::Random)?;
        out.extend_from_slice(tag.as_ref());
        Ok(out)
    }

    /// The data key `sealed` holds, if this key sealed it with `context`.
    pub fn open(&self, sealed: &[u8], context: &[u8]) -> Result<DataKey, KeyError> {
        if sealed.len() != SEALED_KEY_LEN {
            return Err(KeyError::WrongKey);
        }
        let (nonce, rest) = sealed.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| KeyError::WrongKey)?;
        let mut buffer = Zeroizing::new(rest.to_vec());
        let plain = self
            .0
            .aead()
            .open_in_place(nonce, Aad::from(context), &mut buffer)
            .map_err(|_| KeyError::WrongKey)?;
        DataKey::from_bytes(plain)
    }
}

impl std::fmt::Debug for KeyEncryptionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyEncryptionKey(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_key_opens_only_with_its_key_and_context() {
        let kek = KeyEncryptionKey::random().unwrap();
        let key = DataKey::random().unwrap();
        let sealed = kek.seal(&key, b"sse-s3").unwrap();
        assert_eq!(sealed.len(), SEALED_KEY_LEN);
        assert_eq!(
            kek.open(&sealed, b"sse-s3").unwrap().as_bytes(),
            key.as_bytes()
        );
        assert_ne!(
            kek.seal(&key, b"sse-s3").unwrap(),
            sealed,
            "fresh nonce each time"
        );
        assert_eq!(kek.open(&sealed, b"sse-c").unwrap_err(), KeyError::WrongKey);
        let other = KeyEncryptionKey::random().unwrap();
        assert_eq!(
            other.open(&sealed, b"sse-s3").unwrap_err(),
            KeyError::WrongKey
        );
        for at in [0, NONCE_LEN, SEALED_KEY_LEN - 1] {
            let mut altered = sealed.clone();
            altered[at] ^= 1;
            assert_eq!(
                kek.open(&altered, b"sse-s3").unwrap_err(),
                KeyError::WrongKey
            );
        }
        assert_eq!(
            kek.open(&sealed[1..], b"sse-s3").unwrap_err(),
            KeyError::WrongKey
        );
    }

    #[test]
    fn derived_keys_differ_by_salt_and_by_key_and_repeat_for_both() {
        let upload = DataKey::random().unwrap();
        let a = upload.derive(b"salt one");
        assert_eq!(a.as_bytes(), upload.derive(b"salt one").as_bytes());
        assert_ne!(a.as_bytes(), upload.derive(b"salt two").as_bytes());
        assert_ne!(a.as_bytes(), upload.as_bytes());
        let other = DataKey::random().unwrap();
        assert_ne!(a.as_bytes(), other.derive(b"salt one").as_bytes());
    }

    #[test]
    fn keys_round_trip_through_hex_and_hide_in_debug() {
        let kek = KeyEncryptionKey::random().unwrap();
        let again = KeyEncryptionKey::from_hex(&kek.to_hex()).unwrap();
        assert_eq!(again.to_hex(), kek.to_hex());
        assert_eq!(
            KeyEncryptionKey::from_hex("abcd").unwrap_err(),
            KeyError::Length
        );
        assert_eq!(
            KeyEncryptionKey::from_hex("zz").unwrap_err(),
            KeyError::Length
        );
        assert!(!format!("{kek:?}").contains(&kek.to_hex()[..8]));
        assert_eq!(format!("{kek:?}"), "KeyEncryptionKey(<redacted>)");
        let key = DataKey::random().unwrap();
        assert_eq!(format!("{key:?}"), "DataKey(<redacted>)");
        assert_eq!(DataKey::from_bytes(&[0; 31]).unwrap_err(), KeyError::Length);
    }
}
