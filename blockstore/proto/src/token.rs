//! Block tokens: short-lived capabilities, in the manner of HDFS and Ozone
//! block tokens, without which a datanode serves no block frame.
//!
//! Meta signs a token whenever it hands out block locations (a lookup, an
//! allocation): HMAC-SHA256 with one of its rotating [`TokenKey`]s over the
//! block group, the internal indexes it covers, the [`Modes`] it allows and
//! its expiry. Datanodes hold the same keys (sent with heartbeat replies) and
//! check every frame against them; nothing else about the caller matters, so
//! whoever lacks a token meta issued cannot read, write or delete a block,
//! and a token for one block opens no other.
//!
//! On the wire a token is [`BlockToken::LEN`] bytes, big-endian:
//!
//! ```text
//! key id u32 | block u64 | indexes u64 (bit i: internal block i) | modes u8 | expires u64 (unix ms) | mac [32]
//! ```

use crate::ids::{BlockId, BlockKey};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::fmt;
use subtle::ConstantTimeEq;

/// What a token lets its holder do with the blocks it covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Modes(u8);

impl Modes {
    /// Read committed data (TCP reads and short-circuit descriptors).
    pub const READ: Modes = Modes(1);
    /// Write and commit a new block, and drop it while uncommitted.
    pub const WRITE: Modes = Modes(2);
    /// Delete a block, committed or not.
    pub const DELETE: Modes = Modes(4);

    /// Both `self` and `other`.
    pub const fn with(self, other: Modes) -> Modes {
        Modes(self.0 | other.0)
    }

    /// Whether every mode of `wanted` is allowed.
    pub fn allows(self, wanted: Modes) -> bool {
        self.0 & wanted.0 == wanted.0
    }
}

impl fmt::Display for Modes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = [
            (Self::READ, "read"),
            (Self::WRITE, "write"),
            (Self::DELETE, "delete"),
        ]
        .into_iter()
        .filter(|(mode, _)| self.allows(*mode))
        .map(|(_, name)| name)
        .collect();
        f.write_str(&names.join("+"))
    }
}

/// A token signing key: meta makes a new one every rotation period and keeps
/// the old ones while tokens they signed may still be valid.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenKey {
    /// Named in every token the key signs.
    pub id: u32,
    /// The HMAC-SHA256 key.
    #[serde(with = "hex_bytes")]
    pub secret: [u8; 32],
    /// After this (unix ms) no token it signed is valid; the key can go.
    pub retire_at: u64,
}

impl fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenKey")
            .field("id", &self.id)
            .field("retire_at", &self.retire_at)
            .finish_non_exhaustive()
    }
}

mod hex_bytes {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
        let text: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        s.serialize_str(&text)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 32], D::Error> {
        let text = String::deserialize(d)?;
        let mut out = [0u8; 32];
        if text.len() != 64 || !text.is_ascii() {
            return Err(D::Error::custom("a token key is 64 hex digits"));
        }
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(D::Error::custom)?;
        }
        Ok(out)
    }
}

/// A signed capability over the internal blocks `indexes` of `block`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct BlockToken {
    /// The key that signed it.
    pub key_id: u32,
    /// The block group (or replicated block).
    pub block: BlockId,
    /// Bit `i` set: internal block `i` is covered.
    pub indexes: u64,
    /// What the holder may do.
    pub modes: Modes,
    /// Unix ms after which the token is refused.
    pub expires: u64,
    mac: [u8; 32],
}

impl fmt::Debug for BlockToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "BlockToken(key {}, block {}, indexes {:#x}, {}, expires {})",
            self.key_id, self.block, self.indexes, self.modes, self.expires
        )
    }
}

/// Why a datanode refused a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The frame carried no token.
    #[error("no block token")]
    Missing,
    /// The bytes are not a token.
    #[error("malformed block token")]
    Malformed,
    /// Signed with a key this datanode does not have (retired, or forged).
    #[error("block token signed with unknown key {0}")]
    UnknownKey(u32),
    /// The signature does not match: forged or altered.
    #[error("block token signature does not match")]
    BadSignature,
    /// Past its expiry.
    #[error("block token expired")]
    Expired,
    /// It does not cover this block or internal index.
    #[error("block token is for another block")]
    WrongBlock,
    /// It does not allow this operation.
    #[error("block token does not allow {0}")]
    WrongMode(Modes),
}

impl TokenError {
    /// The refusal's name in metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Malformed => "malformed",
            Self::UnknownKey(_) => "unknown_key",
            Self::BadSignature => "bad_signature",
            Self::Expired => "expired",
            Self::WrongBlock => "wrong_block",
            Self::WrongMode(_) => "wrong_mode",
        }
    }
}

/// Bit mask of the internal indexes `indexes`.
pub fn index_mask(indexes: impl IntoIterator<Item = u8>) -> u64 {
    indexes
        .into_iter()
        .filter(|&i| i < 64)
        .fold(0, |mask, i| mask | (1 << i))
}

type HmacSha256 = Hmac<Sha256>;

const DOMAIN: &[u8] = b"tessera block token v1";

impl BlockToken {
    /// Bytes of an encoded token.
    pub const LEN: usize = 4 + 8 + 8 + 1 + 8 + 32;

    fn fields(&self) -> [u8; Self::LEN - 32] {
        let mut out = [0u8; Self::LEN - 32];
        out[0..4].copy_from_slice(&self.key_id.to_be_bytes());
        out[4..12].copy_from_slice(&self.block.0.to_be_bytes());
        out[12..20].copy_from_slice(&self.indexes.to_be_bytes());
        out[20] = self.modes.0;
        out[21..29].copy_from_slice(&self.expires.to_be_bytes());
        out
    }

    fn compute_mac(secret: &[u8; 32], fields: &[u8]) -> [u8; 32] {
        let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes any key length");
        mac.update(DOMAIN);
        mac.update(fields);
        mac.finalize().into_bytes().into()
    }

    /// A token over `indexes` of `block` allowing `modes` until `expires`,
    /// signed with `key`.
    pub fn sign(key: &TokenKey, block: BlockId, indexes: u64, modes: Modes, expires: u64) -> Self {
        let mut token = Self {
            key_id: key.id,
            block,
            indexes,
            modes,
            expires,
            mac: [0; 32],
        };
        token.mac = Self::compute_mac(&key.secret, &token.fields());
        token
    }

    /// The wire form.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        out[..Self::LEN - 32].copy_from_slice(&self.fields());
        out[Self::LEN - 32..].copy_from_slice(&self.mac);
        out
    }

    /// Reads the wire form (the signature is checked by [`TokenKeys::check`]).
    pub fn decode(bytes: &[u8]) -> Result<Self, TokenError> {
        if bytes.len() != Self::LEN {
            return Err(TokenError::Malformed);
        }
        let u64_at = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]));
        let mut mac = [0u8; 32];
        mac.copy_from_slice(&bytes[Self::LEN - 32..]);
        Ok(Self {
            key_id: u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
            block: BlockId(u64_at(4)),
            indexes: u64_at(12),
            modes: Modes(bytes[20]),
            expires: u64_at(21),
            mac,
        })
    }

    /// Whether it covers internal block `key` (its group and index).
    pub fn covers(&self, key: BlockKey) -> bool {
        self.block == key.block && key.index < 64 && self.indexes & (1 << key.index) != 0
    }
}

impl Serialize for BlockToken {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text: String = self.encode().iter().map(|b| format!("{b:02x}")).collect();
        s.serialize_str(&text)
    }
}

impl<'de> Deserialize<'de> for BlockToken {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let text = String::deserialize(d)?;
        if text.len() != 2 * Self::LEN || !text.is_ascii() {
            return Err(D::Error::custom("a block token is 122 hex digits"));
        }
        let bytes: Result<Vec<u8>, _> = (0..Self::LEN)
            .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16))
            .collect();
        let bytes = bytes.map_err(D::Error::custom)?;
        Self::decode(&bytes).map_err(D::Error::custom)
    }
}

/// The keys a datanode checks tokens with.
#[derive(Clone, Debug, Default)]
pub struct TokenKeys {
    keys: Vec<TokenKey>,
}

impl TokenKeys {
    /// Checks tokens with `keys`.
    pub fn new(keys: Vec<TokenKey>) -> Self {
        Self { keys }
    }

    /// The keys held, newest last.
    pub fn keys(&self) -> &[TokenKey] {
        &self.keys
    }

    /// Whether no key is held yet (a datanode that has not heard from meta).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Checks that `token` is meta's, unexpired at `now` (unix ms), covers
    /// `key` and allows `mode`.
    pub fn check(
        &self,
        token: Option<&BlockToken>,
        key: BlockKey,
        mode: Modes,
        now: u64,
    ) -> Result<(), TokenError> {
        let token = token.ok_or(TokenError::Missing)?;
        let signing = self
            .keys
            .iter()
            .find(|k| k.id == token.key_id)
            .ok_or(TokenError::UnknownKey(token.key_id))?;
        let expected = BlockToken::compute_mac(&signing.secret, &token.fields());
        if !bool::from(expected.ct_eq(&token.mac)) {
            return Err(TokenError::BadSignature);
        }
        if now > token.expires {
            return Err(TokenError::Expired);
        }
        if !token.covers(key) {
            return Err(TokenError::WrongBlock);
        }
        if !token.modes.allows(mode) {
            return Err(TokenError::WrongMode(mode));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: u32, fill: u8) -> TokenKey {
        TokenKey {
            id,
            secret: [fill; 32],
            retire_at: u64::MAX,
        }
    }

    const NOW: u64 = 1_000_000;

    #[test]
    fn a_token_opens_its_blocks_for_its_modes_until_it_expires() {
        let keys = TokenKeys::new(vec![key(1, 7), key(2, 9)]);
        let token = BlockToken::sign(
            &key(2, 9),
            BlockId(40),
            index_mask([0, 3]),
            Modes::READ,
            NOW + 10,
        );
        let ok = |k: BlockKey, m: Modes, at: u64| keys.check(Some(&token), k, m, at);
        assert_eq!(ok(BlockKey::new(BlockId(40), 0), Modes::READ, NOW), Ok(()));
        assert_eq!(
            ok(BlockKey::new(BlockId(40), 3), Modes::READ, NOW + 10),
            Ok(())
        );
        assert_eq!(
            ok(BlockKey::new(BlockId(40), 3), Modes::READ, NOW + 11),
            Err(TokenError::Expired)
        );
        assert_eq!(
            ok(BlockKey::new(BlockId(40), 1), Modes::READ, NOW),
            Err(TokenError::WrongBlock)
        );
        assert_eq!(
            ok(BlockKey::new(BlockId(41), 0), Modes::READ, NOW),
            Err(TokenError::WrongBlock)
        );
        assert_eq!(
            ok(BlockKey::new(BlockId(40), 0), Modes::WRITE, NOW),
            Err(TokenError::WrongMode(Modes::WRITE))
        );
        assert_eq!(
            keys.check(None, BlockKey::new(BlockId(40), 0), Modes::READ, NOW),
            Err(TokenError::Missing)
        );
    }

    #[test]
    fn forged_altered_and_unknown_tokens_are_refused() {
        let keys = TokenKeys::new(vec![key(1, 7)]);
        let block = BlockKey::new(BlockId(5), 0);
        let forged = BlockToken::sign(&key(1, 8), BlockId(5), 1, Modes::DELETE, NOW + 10);
        assert_eq!(
            keys.check(Some(&forged), block, Modes::DELETE, NOW),
            Err(TokenError::BadSignature)
        );
        let unknown = BlockToken::sign(&key(3, 7), BlockId(5), 1, Modes::DELETE, NOW + 10);
        assert_eq!(
            keys.check(Some(&unknown), block, Modes::DELETE, NOW),
            Err(TokenError::UnknownKey(3))
        );
        // Every field is under the signature: widening any one breaks it.
        let good = BlockToken::sign(&key(1, 7), BlockId(5), 1, Modes::READ, NOW + 10);
        let mut bytes = good.encode();
        for at in [4 + 7, 12 + 7, 20, 21 + 7] {
            let mut altered = bytes;
            altered[at] ^= 0x02;
            let altered = BlockToken::decode(&altered).unwrap();
            assert_eq!(
                keys.check(Some(&altered), block, Modes::READ, NOW),
                Err(TokenError::BadSignature)
            );
        }
        bytes[BlockToken::LEN - 1] ^= 1;
        let tampered = BlockToken::decode(&bytes).unwrap();
        assert_eq!(
            keys.check(Some(&tampered), block, Modes::READ, NOW),
            Err(TokenError::BadSignature)
        );
        assert_eq!(
            TokenKeys::default().check(Some(&good), block, Modes::READ, NOW),
            Err(TokenError::UnknownKey(1))
        );
    }

    #[test]
    fn tokens_round_trip_on_the_wire_and_in_json() {
        let token = BlockToken::sign(
            &key(7, 1),
            BlockId(u64::MAX),
            u64::MAX,
            Modes::READ.with(Modes::WRITE),
            99,
        );
        let wire = token.encode();
        assert_eq!(wire.len(), BlockToken::LEN);
        assert_eq!(BlockToken::decode(&wire), Ok(token));
        assert_eq!(BlockToken::decode(&wire[1..]), Err(TokenError::Malformed));
        let json = serde_json::to_string(&token).unwrap();
        assert_eq!(serde_json::from_str::<BlockToken>(&json).unwrap(), token);
        let k = key(4, 0xab);
        let back: TokenKey = serde_json::from_str(&serde_json::to_string(&k).unwrap()).unwrap();
        assert_eq!(back, k);
        assert!(
            !format!("{k:?}").contains("ab"),
            "a key's secret never reaches logs"
        );
        assert_eq!(token.modes.to_string(), "read+write");
    }

    #[test]
    fn masks_name_their_indexes() {
        assert_eq!(index_mask([0, 1, 4]), 0b10011);
        assert_eq!(index_mask([]), 0);
        assert_eq!(index_mask([63]), 1 << 63);
        assert_eq!(index_mask([64, 200]), 0);
    }
}
