//! The access control documents: AccessControlPolicy (ACLs), OwnershipControls
//! and PublicAccessBlockConfiguration, read from request bodies and written
//! in answers.

use super::parse::{parse_document, Element};
use super::{MalformedXml, XmlWriter};
use access::{AclError, Grant, Grantee, ObjectOwnership, Permission, PublicAccessBlock};

/// Largest access control document read.
pub const ACCESS_BODY_LIMIT: u64 = 64 * 1024;

/// Why an AccessControlPolicy body is refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum AclDocumentError {
    /// 400 MalformedACLError: not an AccessControlPolicy S3's schema allows.
    #[error("malformed AccessControlPolicy")]
    Malformed,
    /// A grantee S3 refuses (invalid id, invalid group URI, an email).
    #[error(transparent)]
    Grantee(#[from] AclError),
}

impl From<MalformedXml> for AclDocumentError {
    fn from(_: MalformedXml) -> Self {
        Self::Malformed
    }
}

fn child<'a>(element: &'a Element, name: &str) -> Option<&'a Element> {
    element.children.iter().find(|c| c.name == name)
}

/// The owner ID and grants of an AccessControlPolicy body.
pub fn parse_access_control_policy(bytes: &[u8]) -> Result<(String, Vec<Grant>), AclDocumentError> {
    let root = parse_document(bytes)?;
    if root.name != "AccessControlPolicy" {
        return Err(AclDocumentError::Malformed);
    }
    let owner = child(&root, "Owner")
        .and_then(|o| child(o, "ID"))
        .map(|id| id.text.trim().to_string())
        .filter(|id| !id.is_empty())
        .ok_or(AclDocumentError::Malformed)?;
    let list = child(&root, "AccessControlList").ok_or(AclDocumentError::Malformed)?;
    let mut grants = Vec::new();
    for grant in &list.children {
        if grant.name != "Grant" {
            return Err(AclDocumentError::Malformed);
        }
        let permission = child(grant, "Permission")
            .and_then(|p| Permission::parse(p.text.trim()))
            .ok_or(AclDocumentError::Malformed)?;
        let grantee = child(grant, "Grantee").ok_or(AclDocumentError::Malformed)?;
        let grantee = if let Some(id) = child(grantee, "ID") {
            Grantee::user(id.text.trim())?
        } else if let Some(uri) = child(grantee, "URI") {
            Grantee::group(uri.text.trim())?
        } else if let Some(email) = child(grantee, "EmailAddress") {
            return Err(AclError::UnresolvableEmail(email.text.trim().to_string()).into());
        } else {
            return Err(AclDocumentError::Malformed);
        };
        grants.push(Grant::new(grantee, permission));
    }
    if grants.len() > access::MAX_GRANTS {
        return Err(AclError::TooManyGrants.into());
    }
    Ok((owner, grants))
}

/// AccessControlPolicy: the owner and each grant, as GetBucketAcl and
/// GetObjectAcl answer.
pub fn access_control_policy(owner_id: &str, grants: &[Grant]) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.open_root("AccessControlPolicy");
    w.open("Owner");
    w.element("ID", owner_id);
    w.close("Owner");
    w.open("AccessControlList");
    for grant in grants {
        w.open("Grant");
        let kind = match grant.grantee {
            Grantee::User(_) => "CanonicalUser",
            _ => "Group",
        };
        w.open_with_attributes(
            "Grantee",
            &[
                ("xmlns:xsi", "http://www.w3.org/2001/XMLSchema-instance"),
                ("xsi:type", kind),
            ],
        );
        match (&grant.grantee, grant.grantee.uri()) {
            (Grantee::User(id), _) => w.element("ID", id),
            (_, Some(uri)) => w.element("URI", uri),
            (_, None) => {}
        }
        w.close("Grantee");
        w.element("Permission", grant.permission.as_str());
        w.close("Grant");
    }
    w.close("AccessControlList");
    w.close("AccessControlPolicy");
    w.finish()
}

/// The one rule's ObjectOwnership of an OwnershipControls body.
pub fn parse_ownership_controls(bytes: &[u8]) -> Result<ObjectOwnership, MalformedXml> {
    let root = parse_document(bytes)?;
    match root.children.as_slice() {
        [rule] if root.name == "OwnershipControls" && rule.name == "Rule" => {
            match rule.children.as_slice() {
                [setting] if setting.name == "ObjectOwnership" => {
                    ObjectOwnership::parse(setting.text.trim()).ok_or(MalformedXml)
                }
                _ => Err(MalformedXml),
            }
        }
        _ => Err(MalformedXml),
    }
}

/// OwnershipControls with one rule.
pub fn ownership_controls(ownership: ObjectOwnership) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.open_root("OwnershipControls");
    w.open("Rule");
    w.element("ObjectOwnership", ownership.as_str());
    w.close("Rule");
    w.close("OwnershipControls");
    w.finish()
}

/// PolicyStatus for GetBucketPolicyStatus.
pub fn policy_status(is_public: bool) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.open_root("PolicyStatus");
    w.boolean("IsPublic", is_public);
    w.close("PolicyStatus");
    w.finish()
}

/// A PublicAccessBlockConfiguration body; a flag left out is false.
pub fn parse_public_access_block(bytes: &[u8]) -> Result<PublicAccessBlock, MalformedXml> {
    let root = parse_document(bytes)?;
    if root.name != "PublicAccessBlockConfiguration" {
        return Err(MalformedXml);
    }
    let mut block = PublicAccessBlock {
        block_public_acls: false,
        ignore_public_acls: false,
        block_public_policy: false,
        restrict_public_buckets: false,
    };
    for setting in &root.children {
        let flag = match setting.name.as_str() {
            "BlockPublicAcls" => &mut block.block_public_acls,
            "IgnorePublicAcls" => &mut block.ignore_public_acls,
            "BlockPublicPolicy" => &mut block.block_public_policy,
            "RestrictPublicBuckets" => &mut block.restrict_public_buckets,
            _ => return Err(MalformedXml),
        };
        *flag = match setting.text.trim() {
            "true" | "TRUE" | "True" => true,
            "false" | "FALSE" | "False" => false,
            _ => return Err(MalformedXml),
        };
    }
    Ok(block)
}

/// PublicAccessBlockConfiguration with its four flags.
pub fn public_access_block(block: &PublicAccessBlock) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.open_root("PublicAccessBlockConfiguration");
    w.boolean("BlockPublicAcls", block.block_public_acls);
    w.boolean("IgnorePublicAcls", block.ignore_public_acls);
    w.boolean("BlockPublicPolicy", block.block_public_policy);
    w.boolean("RestrictPublicBuckets", block.restrict_public_buckets);
    w.close("PublicAccessBlockConfiguration");
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> String {
        access::canonical_user_id(name)
    }

    #[test]
    fn acl_documents_round_trip() {
        let grants = vec![
            Grant::full_control(&id("alice")),
            Grant::new(Grantee::AllUsers, Permission::Read),
            Grant::new(Grantee::User(id("bob")), Permission::WriteAcp),
            Grant::new(Grantee::LogDelivery, Permission::Write),
        ];
        let doc = access_control_policy(&id("alice"), &grants);
        let text = String::from_utf8(doc.clone()).unwrap();
        assert!(text.contains(
            "<Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" xsi:type=\"Group\">\
             <URI>http://acs.amazonaws.com/groups/global/AllUsers</URI></Grantee><Permission>READ</Permission>"
        ), "{text}");
        assert_eq!(
            parse_access_control_policy(&doc).unwrap(),
            (id("alice"), grants)
        );
    }

    #[test]
    fn bad_acl_documents_are_refused() {
        let doc = |grants: &str| {
            format!(
                "<AccessControlPolicy><Owner><ID>{}</ID></Owner><AccessControlList>{grants}\
                 </AccessControlList></AccessControlPolicy>",
                id("alice")
            )
        };
        let grant = |grantee: &str, permission: &str| {
            format!(
                "<Grant><Grantee>{grantee}</Grantee><Permission>{permission}</Permission></Grant>"
            )
        };
        let parse = |text: String| parse_access_control_policy(text.as_bytes());
        assert_eq!(
            parse(doc(&grant("<ID>x</ID>", "READ"))),
            Err(AclDocumentError::Grantee(AclError::InvalidId("x".into())))
        );
        assert!(matches!(
            parse(doc(&grant("<URI>http://example.com</URI>", "READ"))),
            Err(AclDocumentError::Grantee(AclError::InvalidGroupUri(_)))
        ));
        assert!(matches!(
            parse(doc(&grant("<EmailAddress>a@b.c</EmailAddress>", "READ"))),
            Err(AclDocumentError::Grantee(AclError::UnresolvableEmail(_)))
        ));
        assert_eq!(
            parse(doc(&grant(&format!("<ID>{}</ID>", id("b")), "READ_WRITE"))),
            Err(AclDocumentError::Malformed)
        );
        let no_owner = "<AccessControlPolicy><AccessControlList/></AccessControlPolicy>";
        assert_eq!(
            parse(no_owner.to_string()),
            Err(AclDocumentError::Malformed)
        );
        let many = grant(
            "<URI>http://acs.amazonaws.com/groups/global/AllUsers</URI>",
            "READ",
        )
        .repeat(101);
        assert_eq!(
            parse(doc(&many)),
            Err(AclDocumentError::Grantee(AclError::TooManyGrants))
        );
    }

    #[test]
    fn ownership_and_public_access_block_documents() {
        for ownership in [
            ObjectOwnership::BucketOwnerEnforced,
            ObjectOwnership::BucketOwnerPreferred,
            ObjectOwnership::ObjectWriter,
        ] {
            assert_eq!(
                parse_ownership_controls(&ownership_controls(ownership)),
                Ok(ownership)
            );
        }
        for bad in [
            "<OwnershipControls><Rule><ObjectOwnership>Mine</ObjectOwnership></Rule></OwnershipControls>",
            "<OwnershipControls><Rule/></OwnershipControls>",
            "<OwnershipControls><Rule><ObjectOwnership>ObjectWriter</ObjectOwnership></Rule>\
             <Rule><ObjectOwnership>ObjectWriter</ObjectOwnership></Rule></OwnershipControls>",
        ] {
            assert_eq!(parse_ownership_controls(bad.as_bytes()), Err(MalformedXml), "{bad}");
        }
        let block = PublicAccessBlock {
            block_public_acls: true,
            ignore_public_acls: false,
            block_public_policy: true,
            restrict_public_buckets: false,
        };
        assert_eq!(
            parse_public_access_block(&public_access_block(&block)),
            Ok(block)
        );
        let partial = b"<PublicAccessBlockConfiguration><IgnorePublicAcls>true</IgnorePublicAcls>\
                        </PublicAccessBlockConfiguration>";
        assert_eq!(
            parse_public_access_block(partial),
            Ok(PublicAccessBlock {
                block_public_acls: false,
                ignore_public_acls: true,
                block_public_policy: false,
                restrict_public_buckets: false,
            })
        );
        assert_eq!(
            parse_public_access_block(b"<PublicAccessBlockConfiguration><BlockPublicAcls>yes</BlockPublicAcls></PublicAccessBlockConfiguration>"),
            Err(MalformedXml)
        );
    }
}
