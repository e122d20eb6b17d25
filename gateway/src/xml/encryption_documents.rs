//! ServerSideEncryptionConfiguration (Put/GetBucketEncryption), read
//! strictly and written back.

use super::parse::{leaf, leaves, parse_document, Element};
use super::{MalformedXml, XmlWriter};
use meta_api::{BucketEncryption, EncryptionMode};

/// Why a ServerSideEncryptionConfiguration was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum EncryptionConfigurationError {
    /// Not a configuration S3 would read (MalformedXML).
    Malformed,
    /// A KMS key named for an algorithm that takes none (InvalidArgument).
    KeyWithoutKms,
    /// An algorithm S3 has and Tessera does not offer yet (501).
    NotOffered(&'static str),
}

impl From<MalformedXml> for EncryptionConfigurationError {
    fn from(_: MalformedXml) -> Self {
        Self::Malformed
    }
}

/// A ServerSideEncryptionConfiguration body: one Rule with an
/// ApplyServerSideEncryptionByDefault (an SSEAlgorithm, a KMSMasterKeyID
/// for KMS only) and an optional BucketKeyEnabled.
pub fn parse_encryption_configuration(
    bytes: &[u8],
) -> Result<BucketEncryption, EncryptionConfigurationError> {
    use EncryptionConfigurationError::*;
    let root = parse_document(bytes)?;
    let [rule] = root.children.as_slice() else {
        return Err(Malformed);
    };
    if root.name != "ServerSideEncryptionConfiguration" || rule.name != "Rule" {
        return Err(Malformed);
    }
    let mut default = None;
    let mut bucket_key_enabled = None;
    for child in &rule.children {
        match child.name.as_str() {
            "ApplyServerSideEncryptionByDefault" if default.is_none() => {
                default = Some(parse_default(child)?);
            }
            "BucketKeyEnabled" if bucket_key_enabled.is_none() && child.children.is_empty() => {
                bucket_key_enabled = Some(match child.text.trim() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(Malformed),
                });
            }
            _ => return Err(Malformed),
        }
    }
    let (mode, kms_key_id) = default.ok_or(Malformed)?;
    Ok(BucketEncryption {
        mode,
        bucket_key_enabled: bucket_key_enabled.unwrap_or(false),
        kms_key_id,
    })
}

/// The default's mode and, for SSE-KMS, its key as put.
fn parse_default(
    element: &Element,
) -> Result<(EncryptionMode, Option<String>), EncryptionConfigurationError> {
    let fields = leaves(element, &["SSEAlgorithm", "KMSMasterKeyID"])?;
    let kms_key = leaf(&fields, "KMSMasterKeyID");
    match leaf(&fields, "SSEAlgorithm") {
        Some("AES256") if kms_key.is_some() => Err(EncryptionConfigurationError::KeyWithoutKms),
        Some("AES256") => Ok((EncryptionMode::S3, None)),
        Some("aws:kms") => Ok((EncryptionMode::Kms, kms_key.map(str::to_string))),
        Some("aws:kms:dsse") => Err(EncryptionConfigurationError::NotOffered(
            "bucket default encryption with dual-layer KMS keys (DSSE-KMS)",
        )),
        _ => Err(EncryptionConfigurationError::Malformed),
    }
}

/// ServerSideEncryptionConfiguration as GetBucketEncryption answers it.
pub fn encryption_configuration(encryption: &BucketEncryption) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.open_root("ServerSideEncryptionConfiguration");
    w.open("Rule");
    w.open("ApplyServerSideEncryptionByDefault");
    w.element("SSEAlgorithm", encryption.mode.algorithm());
    w.optional("KMSMasterKeyID", encryption.kms_key_id.as_deref());
    w.close("ApplyServerSideEncryptionByDefault");
    w.boolean("BucketKeyEnabled", encryption.bucket_key_enabled);
    w.close("Rule");
    w.close("ServerSideEncryptionConfiguration");
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document(rule: &str) -> String {
        format!(
            "<ServerSideEncryptionConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">\
             {rule}</ServerSideEncryptionConfiguration>"
        )
    }

    fn parse(rule: &str) -> Result<BucketEncryption, EncryptionConfigurationError> {
        parse_encryption_configuration(document(rule).as_bytes())
    }

    #[test]
    fn configurations_read_back_as_written() {
        let put = parse(
            "<Rule><ApplyServerSideEncryptionByDefault><SSEAlgorithm>AES256</SSEAlgorithm>\
             </ApplyServerSideEncryptionByDefault><BucketKeyEnabled>true</BucketKeyEnabled></Rule>",
        )
        .unwrap();
        assert_eq!(
            put,
            BucketEncryption {
                mode: EncryptionMode::S3,
                bucket_key_enabled: true,
                kms_key_id: None,
            }
        );
        let written = encryption_configuration(&put);
        assert_eq!(parse_encryption_configuration(&written).unwrap(), put);
        let plain = parse(
            "<Rule><ApplyServerSideEncryptionByDefault><SSEAlgorithm>AES256</SSEAlgorithm>\
             </ApplyServerSideEncryptionByDefault></Rule>",
        )
        .unwrap();
        assert!(!plain.bucket_key_enabled);
        let kms = parse(
            "<Rule><ApplyServerSideEncryptionByDefault><SSEAlgorithm>aws:kms</SSEAlgorithm>\
             <KMSMasterKeyID>alias/app</KMSMasterKeyID></ApplyServerSideEncryptionByDefault></Rule>",
        )
        .unwrap();
        assert_eq!(kms.mode, EncryptionMode::Kms);
        assert_eq!(kms.kms_key_id.as_deref(), Some("alias/app"));
        assert_eq!(
            parse_encryption_configuration(&encryption_configuration(&kms)).unwrap(),
            kms
        );
    }

    #[test]
    fn what_s3_refuses_is_refused() {
        use EncryptionConfigurationError::*;
        let apply = |inner: &str| {
            parse(&format!(
                "<Rule><ApplyServerSideEncryptionByDefault>{inner}\
                 </ApplyServerSideEncryptionByDefault></Rule>"
            ))
        };
        assert_eq!(apply("<SSEAlgorithm>DES</SSEAlgorithm>"), Err(Malformed));
        assert_eq!(apply(""), Err(Malformed));
        assert_eq!(
            apply("<SSEAlgorithm>AES256</SSEAlgorithm><KMSMasterKeyID>k</KMSMasterKeyID>"),
            Err(KeyWithoutKms)
        );
        assert!(matches!(
            apply("<SSEAlgorithm>aws:kms:dsse</SSEAlgorithm>"),
            Err(NotOffered(_))
        ));
        assert_eq!(parse(""), Err(Malformed));
        assert_eq!(parse("<Rule></Rule>"), Err(Malformed));
        let rule = "<Rule><ApplyServerSideEncryptionByDefault><SSEAlgorithm>AES256\
                    </SSEAlgorithm></ApplyServerSideEncryptionByDefault></Rule>";
        assert_eq!(parse(&format!("{rule}{rule}")), Err(Malformed), "two rules");
        assert_eq!(
            parse(&rule.replace("</Rule>", "<BucketKeyEnabled>yes</BucketKeyEnabled></Rule>")),
            Err(Malformed)
        );
    }
}
