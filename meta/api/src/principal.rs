//! Who a meta RPC connection acts as, and the credentials that prove it.
//!
//! Every connection opens with a handshake carrying one secret: the admin
//! token, or a cluster credential meta minted for one datanode or one
//! gateway. A credential names its holder and a generation, and carries an
//! HMAC-SHA256 over both with meta's credential key:
//!
//! ```text
//! tdn1.<datanode id>.<generation>.<64 hex digits>     a datanode
//! tgw1.<gateway name>.<generation>.<64 hex digits>    a gateway
//! ```
//!
//! Meta keeps no copy of a credential, only the current generation of each
//! holder: rotating one mints the next generation and refuses every older
//! one. What each holder may ask is decided once, in
//! [`crate::AnyRequest::may_be_sent_by`].

use hmac::{Hmac, Mac};
use proto::DatanodeId;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::fmt;
use subtle::ConstantTimeEq;

/// Who a connection acts as, set once by the secret of its handshake.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Principal {
    /// The admin token: every request.
    Admin,
    /// A gateway (named so that each can be rotated alone): the namespace,
    /// S3 credentials, block placement; never heartbeats or block reports.
    Gateway(String),
    /// One datanode: its own heartbeats and block reports, nothing else.
    Datanode(DatanodeId),
}

impl Principal {
    /// The key of this principal's generation in meta's store (`dn.<id>`,
    /// `gw.<name>`); None for the admin, whose token has no generation.
    pub fn generation_key(&self) -> Option<String> {
        let (kind, name) = self.kind_and_name()?;
        Some(format!("{kind}.{name}"))
    }

    fn kind_and_name(&self) -> Option<(CredentialKind, &str)> {
        match self {
            Principal::Admin => None,
            Principal::Gateway(name) => Some((CredentialKind::Gateway, name)),
            Principal::Datanode(id) => Some((CredentialKind::Datanode, &id.0)),
        }
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Principal::Admin => f.write_str("admin"),
            Principal::Gateway(name) => write!(f, "gateway {name}"),
            Principal::Datanode(id) => write!(f, "datanode {id}"),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum CredentialKind {
    Datanode,
    Gateway,
}

impl CredentialKind {
    const ALL: [CredentialKind; 2] = [CredentialKind::Datanode, CredentialKind::Gateway];

    fn prefix(self) -> &'static str {
        match self {
            CredentialKind::Datanode => "tdn1",
            CredentialKind::Gateway => "tgw1",
        }
    }
}

impl fmt::Display for CredentialKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CredentialKind::Datanode => "dn",
            CredentialKind::Gateway => "gw",
        })
    }
}

/// Meta's secret for minting and checking credentials (32 random bytes).
#[derive(Clone)]
pub struct CredentialKey([u8; 32]);

impl CredentialKey {
    /// Length of a key in hex digits, as saved in files.
    pub const HEX_LEN: usize = 64;

    /// A fresh random key.
    pub fn generate() -> CredentialKey {
        CredentialKey(rand::random())
    }

    /// The key saved as 64 hex digits (surrounding whitespace ignored).
    pub fn from_hex(text: &str) -> Option<CredentialKey> {
        let mut key = [0u8; 32];
        hex::decode_to_slice(text.trim(), &mut key).ok()?;
        Some(CredentialKey(key))
    }

    /// The key as 64 hex digits.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Debug for CredentialKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CredentialKey(<redacted>)")
    }
}

/// A datanode's or a gateway's proof of who it is (see the module docs).
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    /// Whom it names: a datanode or a gateway.
    pub principal: Principal,
    /// Meta refuses it once the holder's generation moved past this one.
    pub generation: u64,
    mac: [u8; 32],
}

/// Why a credential cannot be minted for a principal.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CredentialError {
    /// The admin authenticates with the admin token, not a credential.
    #[error("the admin has a token, not a credential")]
    Admin,
    /// A gateway name or datanode id outside `[A-Za-z0-9_-]{1,64}`.
    #[error("{0:?} is not a valid name: 1 to 64 letters, digits, '-' or '_'")]
    BadName(String),
}

/// Whether `name` may name a credential's holder: nothing that could be
/// confused with the separators of the credential's text.
fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn compute_mac(key: &CredentialKey, kind: CredentialKind, name: &str, generation: u64) -> [u8; 32] {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(&key.0).expect("HMAC-SHA256 takes a key of any length");
    mac.update(b"tessera cluster credential\0");
    mac.update(kind.prefix().as_bytes());
    mac.update(b"\0");
    mac.update(name.as_bytes());
    mac.update(b"\0");
    mac.update(&generation.to_be_bytes());
    mac.finalize().into_bytes().into()
}

impl Credential {
    /// Mints the credential of `principal` at `generation` with `key`.
    pub fn mint(
        key: &CredentialKey,
        principal: Principal,
        generation: u64,
    ) -> Result<Credential, CredentialError> {
        let (kind, name) = principal.kind_and_name().ok_or(CredentialError::Admin)?;
        if !valid_name(name) {
            return Err(CredentialError::BadName(name.to_string()));
        }
        let mac = compute_mac(key, kind, name, generation);
        Ok(Credential {
            principal,
            generation,
            mac,
        })
    }

    /// Reads a credential's text; None when it is not one (the admin token,
    /// a typo). Says nothing about whether it is genuine: see [`Self::verify`].
    pub fn parse(text: &str) -> Option<Credential> {
        let mut fields = text.trim().split('.');
        let prefix = fields.next()?;
        let kind = CredentialKind::ALL
            .into_iter()
            .find(|kind| kind.prefix() == prefix)?;
        let name = fields.next().filter(|name| valid_name(name))?;
        let generation = fields.next()?.parse().ok()?;
        let mut mac = [0u8; 32];
        hex::decode_to_slice(fields.next()?, &mut mac).ok()?;
        if fields.next().is_some() {
            return None;
        }
        let principal = match kind {
            CredentialKind::Datanode => Principal::Datanode(DatanodeId(name.to_string())),
            CredentialKind::Gateway => Principal::Gateway(name.to_string()),
        };
        Some(Credential {
            principal,
            generation,
            mac,
        })
    }

    /// Whether `key` minted this credential (compared in constant time).
    pub fn verify(&self, key: &CredentialKey) -> bool {
        let Some((kind, name)) = self.principal.kind_and_name() else {
            return false;
        };
        let expected = compute_mac(key, kind, name, self.generation);
        bool::from(expected.ct_eq(&self.mac))
    }
}

impl fmt::Display for Credential {
    /// The text a holder presents (a secret: never log it).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, name) = self
            .principal
            .kind_and_name()
            .expect("credentials are minted for datanodes and gateways only");
        write!(
            f,
            "{}.{name}.{}.{}",
            kind.prefix(),
            self.generation,
            hex::encode(self.mac)
        )
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("principal", &self.principal)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn datanode(id: &str) -> Principal {
        Principal::Datanode(DatanodeId(id.to_string()))
    }

    #[test]
    fn credentials_round_trip_and_verify_with_their_key_only() {
        let key = CredentialKey::generate();
        for principal in [datanode("0b5e-4f1c"), Principal::Gateway("gw_1".into())] {
            let credential = Credential::mint(&key, principal.clone(), 7).unwrap();
            let parsed = Credential::parse(&credential.to_string()).unwrap();
            assert_eq!(parsed, credential);
            assert_eq!(
                (parsed.principal.clone(), parsed.generation),
                (principal, 7)
            );
            assert!(parsed.verify(&key));
            assert!(!parsed.verify(&CredentialKey::generate()));
        }
        let key_text = key.to_hex();
        assert_eq!(key_text.len(), CredentialKey::HEX_LEN);
        let again = CredentialKey::from_hex(&format!("{key_text}\n")).unwrap();
        assert_eq!(again.0, key.0);
    }

    #[test]
    fn altered_credentials_fail() {
        let key = CredentialKey::generate();
        let text = Credential::mint(&key, datanode("a"), 3)
            .unwrap()
            .to_string();
        let altered = [
            text.replacen("tdn1.a.", "tdn1.b.", 1),
            text.replacen("tdn1.", "tgw1.", 1),
            text.replacen(".3.", ".4.", 1),
        ];
        for forged in altered {
            let parsed = Credential::parse(&forged).unwrap();
            assert!(!parsed.verify(&key), "{forged} verified");
        }
        let mut flipped = text.clone().into_bytes();
        let last = flipped.len() - 1;
        flipped[last] = if flipped[last] == b'0' { b'1' } else { b'0' };
        let flipped = String::from_utf8(flipped).unwrap();
        assert!(!Credential::parse(&flipped).unwrap().verify(&key));
        for junk in [
            "",
            "tessera-admin-token",
            &format!("{text}.x"),
            &text[..text.len() - 2],
            "tdn1..0.00",
            "tdn1.a b.0.00",
        ] {
            assert!(Credential::parse(junk).is_none(), "{junk:?} parsed");
        }
    }

    #[test]
    fn only_datanodes_and_gateways_with_plain_names_get_credentials() {
        let key = CredentialKey::generate();
        assert_eq!(
            Credential::mint(&key, Principal::Admin, 0).unwrap_err(),
            CredentialError::Admin
        );
        for bad in ["", "a.b", "a b", &"x".repeat(65)] {
            assert!(matches!(
                Credential::mint(&key, Principal::Gateway(bad.into()), 0),
                Err(CredentialError::BadName(_))
            ));
        }
        assert_eq!(datanode("a").generation_key().as_deref(), Some("dn.a"));
        assert_eq!(
            Principal::Gateway("g".into()).generation_key().as_deref(),
            Some("gw.g")
        );
        assert_eq!(Principal::Admin.generation_key(), None);
    }
}
