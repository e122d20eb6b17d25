//! Validation of names that come from users: S3 bucket names (shared with the
//! gateway, so both refuse the same names with the same reason), user names,
//! object keys and version ids.

use crate::records::{VersionStamp, NULL_VERSION};

/// Checks `name` against the S3 general-purpose bucket naming rules; the error
/// says which rule failed.
pub fn validate_bucket_name(name: &str) -> Result<(), String> {
    if !(3..=63).contains(&name.len()) {
        return Err("bucket names must be between 3 and 63 characters long".into());
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '.' || *c == '-'))
    {
        return Err(format!(
            "bucket names may contain only lowercase letters, digits, dots and hyphens, not {c:?}"
        ));
    }
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = name.as_bytes();
    if !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return Err("bucket names must begin and end with a letter or digit".into());
    }
    if name.contains("..") {
        return Err("bucket names must not contain two adjacent dots".into());
    }
    if name.parse::<std::net::Ipv4Addr>().is_ok() {
        return Err("bucket names must not be formatted as an IP address".into());
    }
    if name.starts_with("xn--") {
        return Err("bucket names must not start with xn--".into());
    }
    if name.starts_with("sthree-") {
        return Err("bucket names must not start with sthree-".into());
    }
    if name.ends_with("-s3alias") {
        return Err("bucket names must not end with -s3alias".into());
    }
    if name.ends_with("--ol-s3") {
        return Err("bucket names must not end with --ol-s3".into());
    }
    Ok(())
}

/// Checks a user name: 1-64 ASCII letters, digits, '.', '_', '-' or '@'.
pub fn validate_user_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 64 {
        return Err("user names must be between 1 and 64 characters long".into());
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'))
    {
        return Err("user names may contain only letters, digits, '.', '_', '-' and '@'".into());
    }
    Ok(())
}

/// Checks an object key: 1 to 1024 bytes of UTF-8 (the type guarantees UTF-8).
pub fn validate_object_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("object keys must not be empty".into());
    }
    if key.len() > 1024 {
        return Err("object keys must be at most 1024 bytes long".into());
    }
    Ok(())
}

/// Hex digits of the sequence number that starts every version id.
const VERSION_SEQ_DIGITS: usize = 16;
/// Random letters and digits after it, so that ids are not guessable.
const VERSION_RANDOM_CHARS: usize = 16;

/// A version a request names.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum VersionRef {
    /// `null`: the version written while versioning was off or suspended.
    Null,
    /// A version id, with the sequence number it carries.
    Id {
        /// The id as S3 clients send it.
        id: String,
        /// Its place among versions (`VersionStamp::seq`).
        seq: u64,
    },
}

impl VersionRef {
    /// The reference that names the version `stamp` stamps.
    pub fn of(stamp: &VersionStamp) -> Self {
        match &stamp.id {
            None => Self::Null,
            Some(id) => Self::Id {
                id: id.clone(),
                seq: stamp.seq,
            },
        }
    }

    /// Whether `stamp` is the version this names.
    pub fn names(&self, stamp: &VersionStamp) -> bool {
        match self {
            Self::Null => stamp.id.is_none(),
            Self::Id { id, .. } => stamp.id.as_deref() == Some(id),
        }
    }
}

/// A fresh version id for sequence number `seq`: the number in hex, so that
/// the id tells where the version is in a listing, then random characters.
pub fn new_version_id(seq: u64, rng: &mut (impl rand::Rng + ?Sized)) -> String {
    use rand::distributions::{Alphanumeric, DistString};
    let mut id = format!("{seq:0width$x}", width = VERSION_SEQ_DIGITS);
    id.push_str(&Alphanumeric.sample_string(rng, VERSION_RANDOM_CHARS));
    id
}

/// Parses a `versionId` a request sent; the error is S3's message.
pub fn parse_version_id(text: &str) -> Result<VersionRef, &'static str> {
    if text.is_empty() {
        return Err("Version id cannot be the empty string");
    }
    if text == NULL_VERSION {
        return Ok(VersionRef::Null);
    }
    // S3's form: 32 URL-safe characters. An id of that form this server did
    // not make names no version here (sequence number 0 finds none).
    if text.len() != VERSION_SEQ_DIGITS + VERSION_RANDOM_CHARS
        || !text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_')
    {
        return Err("Invalid version id specified");
    }
    let seq = u64::from_str_radix(&text[..VERSION_SEQ_DIGITS], 16).unwrap_or(0);
    Ok(VersionRef::Id {
        id: text.to_string(),
        seq,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_ids_carry_their_sequence_number() {
        let id = new_version_id(0x1234, &mut rand::thread_rng());
        assert_eq!(id.len(), 32);
        assert_eq!(
            parse_version_id(&id),
            Ok(VersionRef::Id {
                id: id.clone(),
                seq: 0x1234
            })
        );
        let mut rng = rand::thread_rng();
        assert_ne!(new_version_id(7, &mut rng), new_version_id(7, &mut rng));
        assert_eq!(parse_version_id("null"), Ok(VersionRef::Null));
        assert_eq!(
            parse_version_id(""),
            Err("Version id cannot be the empty string")
        );
        // Another server's id: S3's form, no sequence number of ours.
        let foreign = "v5n1PPUjOCMHLyyfq0ayjoZ5RZLfVQ.A";
        assert_eq!(
            parse_version_id(foreign),
            Ok(VersionRef::Id {
                id: foreign.into(),
                seq: 0
            })
        );
        for bad in [
            "abc",
            &id[1..],
            &format!("{id}x"),
            "0000000000000001+123456789abcdef",
            "0000000000000001/123456789abcdef",
        ] {
            assert_eq!(
                parse_version_id(bad),
                Err("Invalid version id specified"),
                "{bad}"
            );
        }
    }

    #[test]
    fn accepts_the_aws_examples_of_valid_names() {
        for name in [
            "docexamplebucket1",
            "log-delivery-march-2020",
            "my-hosted-content",
            "docexamplewebsite.com",
            "www.docexamplewebsite.com",
            "my.example.s3.bucket",
            "abc",
            "a-1.b",
        ] {
            assert_eq!(validate_bucket_name(name), Ok(()), "{name}");
        }
        assert!(validate_bucket_name(&"a".repeat(63)).is_ok());
    }

    #[test]
    fn refuses_the_aws_examples_of_invalid_names() {
        for name in [
            "doc_example_bucket",
            "DocExampleBucket",
            "doc-example-bucket-",
            "-doc",
            ".doc",
            "ab",
            "a..b",
            "192.168.5.4",
            "xn--bucket",
            "sthree-bucket",
            "bucket-s3alias",
            "bucket--ol-s3",
            "bucket/name",
            "bück",
        ] {
            assert!(validate_bucket_name(name).is_err(), "{name}");
        }
        assert!(validate_bucket_name(&"a".repeat(64)).is_err());
        assert!(validate_bucket_name("").is_err());
    }

    #[test]
    fn user_names_and_keys() {
        assert!(validate_user_name("alice.smith-2@corp").is_ok());
        assert!(validate_user_name("").is_err());
        assert!(validate_user_name("a b").is_err());
        assert!(validate_object_key("photos/ü.jpg").is_ok());
        assert!(validate_object_key("").is_err());
        assert!(validate_object_key(&"k".repeat(1025)).is_err());
    }
}
