//! The values of a request's condition keys, as bucket policies test them
//! (`aws:SourceIp`, `s3:prefix`, `s3:x-amz-acl`, tags...).

use crate::auth::VerifiedRequest;
use crate::listener::ClientConnection;
use crate::tags::tags_from_header;
use access::ConditionValues;
use http::request::Parts;
use meta_api::ObjectRecord;
use std::time::SystemTime;

/// The condition keys of one request, read as a policy asks for them.
pub struct RequestValues<'a> {
    /// The request head.
    pub parts: &'a Parts,
    /// Its signature.
    pub request: &'a VerifiedRequest,
    /// The object it reads or changes, when the gateway has it.
    pub object: Option<&'a ObjectRecord>,
}

impl RequestValues<'_> {
    fn header(&self, name: &str) -> Option<Vec<String>> {
        let values: Vec<String> = self
            .parts
            .headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_string))
            .collect();
        (!values.is_empty()).then_some(values)
    }

    fn query(&self, name: &str) -> Option<Vec<String>> {
        let query = crate::params::Query::parse(self.parts.uri.query()).ok()?;
        query.get(name).map(|v| vec![v.to_string()])
    }

    fn request_tags(&self) -> Option<std::collections::BTreeMap<String, String>> {
        tags_from_header(&self.parts.headers).ok().flatten()
    }
}

impl ConditionValues for RequestValues<'_> {
    fn values(&self, key: &str) -> Option<Vec<String>> {
        let one = |v: String| Some(vec![v]);
        let client = self.parts.extensions.get::<ClientConnection>();
        let identity = &self.request.identity;
        let user = (!identity.anonymous).then(|| identity.user.clone());
        match key {
            "aws:sourceip" => one(client?.peer.ip().to_string()),
            "aws:securetransport" => one(client?.secure.to_string()),
            "aws:username" | "aws:userid" => one(user?),
            "aws:principaltype" => one(if user.is_some() { "User" } else { "Anonymous" }.into()),
            "aws:currenttime" => one(time::OffsetDateTime::from(SystemTime::now())
                .format(&time::format_description::well_known::Rfc3339)
                .ok()?),
            "aws:epochtime" => one(SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .ok()?
                .as_secs()
                .to_string()),
            "aws:referer" => self.header("referer"),
            "aws:useragent" => self.header("user-agent"),
            "s3:prefix" | "s3:delimiter" | "s3:max-keys" => self.query(&key[3..]),
            "s3:versionid" => self.query("versionId"),
            "s3:signatureversion" => one(self.request.signed_by?.version().into()),
            "s3:authtype" => one(self.request.signed_by?.auth_type().into()),
            "s3:requestobjecttagkeys" => {
                let tags = self.request_tags()?;
                Some(tags.into_keys().collect())
            }
            _ => {
                if let Some(name) = key.strip_prefix("s3:requestobjecttag/") {
                    let tags = self.request_tags()?;
                    let (_, value) = tags.iter().find(|(k, _)| k.eq_ignore_ascii_case(name))?;
                    return one(value.clone());
                }
                if let Some(name) = key.strip_prefix("s3:existingobjecttag/") {
                    let tags = &self.object?.attributes.tags;
                    let (_, value) = tags.iter().find(|(k, _)| k.eq_ignore_ascii_case(name))?;
                    return one(value.clone());
                }
                // s3:x-amz-acl, s3:x-amz-server-side-encryption, s3:x-amz-copy-source...:
                // the request header of that name.
                key.strip_prefix("s3:x-amz-")
                    .and_then(|rest| self.header(&format!("x-amz-{rest}")))
            }
        }
    }
}
