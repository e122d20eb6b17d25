//! Browser form uploads (PostObject): the base64 policy document, its SigV4
//! signature (`x-amz-signature` = HMAC of the policy text with the signing key
//! of `x-amz-credential`) or SigV2 one (`signature`), its expiration and its conditions on the form's
//! fields and on the file's length.

use super::canonical::{signature_matches, AmzDate, CredentialScope, SigningKey};
use super::{AuthError, Identity};
use base64::Engine;
use std::collections::BTreeMap;
use std::time::SystemTime;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// One condition of a policy document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PolicyCondition {
    /// The field (lower-case name, without `$`) must equal the value.
    Eq(String, String),
    /// The field must start with the value (`""` allows anything).
    StartsWith(String, String),
    /// The file must be between these sizes, inclusive.
    ContentLengthRange(u64, u64),
}

/// A decoded policy document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostPolicy {
    /// After this instant the policy no longer allows uploads.
    pub expiration: OffsetDateTime,
    /// Every condition, in document order.
    pub conditions: Vec<PolicyCondition>,
}

/// S3's AccessDenied for a form that its policy does not allow.
fn denied(reason: &str) -> AuthError {
    AuthError::AccessDenied(format!("Invalid according to Policy: {reason}"))
}

fn malformed_policy() -> AuthError {
    AuthError::InvalidArgument("Invalid Policy: Invalid JSON.".to_string())
}

fn as_u64(value: &serde_json::Value) -> Option<u64> {
    value
        .as_u64()
        .or_else(|| value.as_str().and_then(|s| s.parse().ok()))
}

fn field_name(raw: &str) -> String {
    raw.trim_start_matches('$').to_ascii_lowercase()
}

/// Whether `text` is an ISO 8601 instant as S3's policies write it
/// (`2030-01-01T12:00:00.000Z`): a `T` between date and time, which RFC 3339
/// parsers let go as a space.
fn is_iso8601_instant(text: &str) -> bool {
    text.as_bytes()
        .get(10)
        .is_some_and(|b| b.eq_ignore_ascii_case(&b'T'))
}

impl PostPolicy {
    /// Decodes the base64 JSON of the form's `policy` field.
    pub fn decode(encoded: &str) -> Result<Self, AuthError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|_| malformed_policy())?;
        let json: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|_| malformed_policy())?;
        let expiration = json
            .get("expiration")
            .and_then(|e| e.as_str())
            .filter(|e| is_iso8601_instant(e))
            .and_then(|e| OffsetDateTime::parse(e, &Rfc3339).ok())
            .ok_or_else(|| {
                AuthError::InvalidArgument(
                    "Invalid Policy: Invalid 'expiration' value.".to_string(),
                )
            })?;
        let mut conditions = Vec::new();
        let listed = json
            .get("conditions")
            .and_then(|c| c.as_array())
            .ok_or_else(malformed_policy)?;
        for condition in listed {
            conditions.push(match condition {
                serde_json::Value::Object(map) if map.len() == 1 => {
                    let (name, value) = map.iter().next().ok_or_else(malformed_policy)?;
                    let value = value.as_str().ok_or_else(malformed_policy)?;
                    PolicyCondition::Eq(field_name(name), value.to_string())
                }
                serde_json::Value::Array(items) if items.len() == 3 => {
                    let op = items[0].as_str().ok_or_else(malformed_policy)?;
                    match op.to_ascii_lowercase().as_str() {
                        "content-length-range" => {
                            let min = as_u64(&items[1]).ok_or_else(malformed_policy)?;
                            let max = as_u64(&items[2]).ok_or_else(malformed_policy)?;
                            PolicyCondition::ContentLengthRange(min, max)
                        }
                        "eq" | "starts-with" => {
                            let name = items[1].as_str().ok_or_else(malformed_policy)?;
                            let value = items[2].as_str().ok_or_else(malformed_policy)?;
                            if op.eq_ignore_ascii_case("eq") {
                                PolicyCondition::Eq(field_name(name), value.to_string())
                            } else {
                                PolicyCondition::StartsWith(field_name(name), value.to_string())
                            }
                        }
                        _ => return Err(malformed_policy()),
                    }
                }
                _ => return Err(malformed_policy()),
            });
        }
        Ok(Self {
            expiration,
            conditions,
        })
    }

    /// The allowed file sizes, when the policy bounds them.
    pub fn length_range(&self) -> Option<(u64, u64)> {
        self.conditions.iter().find_map(|c| match c {
            PolicyCondition::ContentLengthRange(min, max) => Some((*min, *max)),
            _ => None,
        })
    }

    /// Checks the expiration and every condition against `fields` (lower-case
    /// names; `key` already has `${filename}` replaced, `bucket` added), and
    /// that every field is covered by a condition, as S3 requires.
    pub fn check(
        &self,
        fields: &BTreeMap<String, String>,
        now: SystemTime,
    ) -> Result<(), AuthError> {
        if OffsetDateTime::from(now) > self.expiration {
            return Err(denied("Policy expired."));
        }
        for condition in &self.conditions {
            let (name, ok) = match condition {
                PolicyCondition::Eq(name, value) => (
                    name,
                    fields.get(name).map(String::as_str) == Some(value.as_str()),
                ),
                PolicyCondition::StartsWith(name, prefix) => {
                    let value = fields.get(name).map_or("", String::as_str);
                    // Content-Type may list several values, each checked.
                    let ok = if name == "content-type" {
                        value
                            .split(',')
                            .all(|v| v.trim().starts_with(prefix.as_str()))
                    } else {
                        value.starts_with(prefix.as_str())
                    };
                    (name, ok)
                }
                PolicyCondition::ContentLengthRange(..) => continue,
            };
            if !ok {
                return Err(denied(&format!(
                    "Policy Condition failed: [\"{}\", \"${name}\", ...]",
                    match condition {
                        PolicyCondition::Eq(..) => "eq",
                        _ => "starts-with",
                    }
                )));
            }
        }
        let covered = |name: &str| {
            self.conditions.iter().any(|c| match c {
                PolicyCondition::Eq(n, _) | PolicyCondition::StartsWith(n, _) => n == name,
                PolicyCondition::ContentLengthRange(..) => false,
            })
        };
        for name in fields.keys() {
            let exempt = matches!(
                name.as_str(),
                "policy" | "x-amz-signature" | "file" | "bucket" | "awsaccesskeyid" | "signature"
            ) || name.starts_with("x-ignore-");
            if !exempt && !covered(name) {
                return Err(denied(&format!("Extra input fields: {name}")));
            }
        }
        Ok(())
    }
}

/// Verifies the form's policy signature (SigV4: `x-amz-signature` with the
/// signing key of `x-amz-credential`; SigV2: `signature`, base64 HMAC-SHA1 of
/// the policy with the secret of `AWSAccessKeyId`) and returns the checked
/// policy and who signed it; a form with neither policy nor signature is
/// anonymous, with no policy. `fields` are the form fields by lower-case name.
pub async fn verify_post_form(
    fields: &BTreeMap<String, String>,
    credentials: &super::cache::Credentials,
    realm: &super::Realm<'_>,
    now: SystemTime,
) -> Result<(Option<PostPolicy>, Identity), AuthError> {
    let get = |name: &str| fields.get(name).map(String::as_str);
    let identity = match (get("policy"), get("x-amz-signature"), get("signature")) {
        (Some(policy_text), Some(signature), _) => {
            verify_v4_form(fields, policy_text, signature, credentials, realm.region).await?
        }
        (Some(policy_text), None, Some(signature)) if realm.sigv2 => {
            let access_key = get("awsaccesskeyid").ok_or_else(|| {
                AuthError::InvalidArgument("POST requires the AWSAccessKeyId field".to_string())
            })?;
            let (key, user) = credentials
                .lookups
                .lookup(access_key)
                .await?
                .ok_or(AuthError::InvalidAccessKeyId)?;
            let computed = super::sigv2::sign(&key.secret_key, policy_text.as_bytes());
            if !super::sigv2::signature_matches(&computed, signature) {
                return Err(AuthError::SignatureDoesNotMatch);
            }
            Identity::of_key(key, user)
        }
        (Some(_), None, Some(_)) => return Err(super::unsupported_mechanism()),
        // A policy with no signature, or a signature with no policy: S3
        // names the missing field rather than treating the form as anonymous.
        (Some(_), None, None) => return Err(missing_field(signature_field(fields))),
        (None, Some(_), _) | (None, None, Some(_)) => return Err(missing_field("Policy")),
        (None, None, None) => return Ok((None, Identity::anonymous())),
    };
    let policy = PostPolicy::decode(get("policy").unwrap_or_default())?;
    policy.check(fields, now)?;
    Ok((Some(policy), identity))
}

/// S3's InvalidArgument for a form without one of the fields it needs.
fn missing_field(name: &str) -> AuthError {
    AuthError::InvalidArgument(format!(
        "Bucket POST must contain a field named '{name}'.  If it is specified, please check \
         the order of the fields."
    ))
}

/// The signature field a form's other fields call for: SigV4's when it
/// names a credential, SigV2's otherwise.
fn signature_field(fields: &BTreeMap<String, String>) -> &'static str {
    if fields.contains_key("x-amz-credential") {
        "X-Amz-Signature"
    } else {
        "Signature"
    }
}

/// The SigV4 form fields: algorithm, credential and date, and the signature
/// of the policy text with the signing key they name.
async fn verify_v4_form(
    fields: &BTreeMap<String, String>,
    policy_text: &str,
    signature: &str,
    credentials: &super::cache::Credentials,
    region: &str,
) -> Result<Identity, AuthError> {
    let get = |name: &str| fields.get(name).map(String::as_str);
    if get("x-amz-algorithm") != Some("AWS4-HMAC-SHA256") {
        return Err(AuthError::InvalidArgument(
            "POST requires x-amz-algorithm AWS4-HMAC-SHA256".to_string(),
        ));
    }
    let credential = get("x-amz-credential").ok_or_else(|| {
        AuthError::InvalidArgument("POST requires the x-amz-credential field".to_string())
    })?;
    let scope = CredentialScope::parse(credential, region).map_err(|e| {
        AuthError::InvalidArgument(format!(
            "Error parsing the X-Amz-Credential parameter; {}",
            e.detail(region)
        ))
    })?;
    let date = get("x-amz-date").and_then(AmzDate::parse).ok_or_else(|| {
        AuthError::InvalidArgument("POST requires a valid x-amz-date".to_string())
    })?;
    if date.date() != scope.date {
        return Err(AuthError::InvalidArgument(
            "x-amz-date does not match the credential's date".to_string(),
        ));
    }
    let (key, user) = credentials
        .lookups
        .lookup(&scope.access_key)
        .await?
        .ok_or(AuthError::InvalidAccessKeyId)?;
    let signing_key = SigningKey::derive(&key.secret_key, date.time, &scope.region);
    if !signature_matches(&signing_key.sign(policy_text), signature) {
        return Err(AuthError::SignatureDoesNotMatch);
    }
    Ok(Identity::of_key(key, user))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]

        /// Any policy field, base64 or not, JSON or not: decoded or refused.
        #[test]
        fn any_policy_decodes_or_is_refused(raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300), encode in proptest::prelude::any::<bool>()) {
            use base64::Engine;
            let text = if encode {
                base64::engine::general_purpose::STANDARD.encode(&raw)
            } else {
                String::from_utf8_lossy(&raw).into_owned()
            };
            let _ = PostPolicy::decode(&text);
        }

        /// JSON shaped like a policy, with conditions of every kind and any values.
        #[test]
        fn policy_shaped_json_decodes_or_is_refused(
            expiration in proptest::sample::select(vec!["\"2030-01-01T00:00:00Z\"", "\"x\"", "1", "null"]),
            conditions in proptest::collection::vec(proptest::sample::select(vec![
                "{\"bucket\":\"b\"}", "[\"eq\",\"$key\",\"k\"]", "[\"starts-with\",\"$key\",\"\"]",
                "[\"content-length-range\",1,10]", "[\"content-length-range\",-1,\"a\"]", "[]", "[\"eq\"]",
                "{\"a\":1,\"b\":2}", "7", "\"s\"",
            ]), 0..6),
        ) {
            use base64::Engine;
            let json = format!("{{\"expiration\":{expiration},\"conditions\":[{}]}}", conditions.join(","));
            let _ = PostPolicy::decode(&base64::engine::general_purpose::STANDARD.encode(json));
        }
    }

    fn encode(json: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(json)
    }

    fn fields(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The policy of AWS's "Example: Browser-based upload using HTTP POST (using AWS Signature Version 4)".
    const AWS_EXAMPLE: &str = r#"{ "expiration": "2015-12-30T12:00:00.000Z",
  "conditions": [
    {"bucket": "sigv4examplebucket"},
    ["starts-with", "$key", "user/user1/"],
    {"acl": "public-read"},
    {"success_action_redirect": "http://sigv4examplebucket.s3.amazonaws.com/successful_upload.html"},
    ["starts-with", "$Content-Type", "image/"],
    {"x-amz-meta-uuid": "14365123651274"},
    {"x-amz-server-side-encryption": "AES256"},
    ["starts-with", "$x-amz-meta-tag", ""],
    {"x-amz-credential": "AKIAIOSFODNN7EXAMPLE/20151229/us-east-1/s3/aws4_request"},
    {"x-amz-algorithm": "AWS4-HMAC-SHA256"},
    {"x-amz-date": "20151229T000000Z" }
  ]
}"#;

    #[test]
    fn decodes_the_aws_example_policy() {
        let policy = PostPolicy::decode(&encode(AWS_EXAMPLE)).unwrap();
        assert_eq!(policy.conditions.len(), 11);
        assert_eq!(
            policy.conditions[1],
            PolicyCondition::StartsWith("key".into(), "user/user1/".into())
        );
        assert_eq!(policy.length_range(), None);
    }

    /// The same policy as AWS's example sends it: lines ended by CRLF, with
    /// the blank line before `x-amz-credential`.
    fn aws_example_as_sent() -> String {
        let lines: Vec<&str> = AWS_EXAMPLE.lines().collect();
        let (head, tail) = lines.split_at(10);
        [head, &[""], tail].concat().join("\r\n")
    }

    /// AWS's example gives the signature of its base64 policy with the
    /// example secret on 20151229; ours must be that value, and another
    /// secret or day must not produce it.
    #[test]
    fn policy_signature_is_the_one_in_aws_example() {
        let policy_b64 = encode(&aws_example_as_sent());
        let date = AmzDate::parse("20151229T000000Z").unwrap();
        let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
        let expected = "8afdbf4008c03f22c2cd3cdb72e4afbb1f6a588f3255ac628749a66d7f09699e";
        let signature = SigningKey::derive(secret, date.time, "us-east-1").sign(&policy_b64);
        assert_eq!(signature, expected);
        assert!(signature_matches(
            &signature,
            &expected.to_ascii_uppercase()
        ));
        let next_day = date.time + std::time::Duration::from_secs(86_400);
        for other in [
            SigningKey::derive("other", date.time, "us-east-1"),
            SigningKey::derive(secret, next_day, "us-east-1"),
            SigningKey::derive(secret, date.time, "eu-west-1"),
        ] {
            assert!(!signature_matches(&other.sign(&policy_b64), expected));
        }
    }

    #[test]
    fn a_condition_object_names_one_field() {
        let json = r#"{"expiration": "2030-01-01T00:00:00Z", "conditions": [
            {"bucket": "b", "key": "k"}]}"#;
        assert!(PostPolicy::decode(&encode(json)).is_err());
        let json = r#"{"expiration": "2030-01-01T00:00:00Z", "conditions": [{}]}"#;
        assert!(PostPolicy::decode(&encode(json)).is_err());
    }

    #[test]
    fn conditions_expiry_and_extra_fields() {
        let json = r#"{"expiration": "2030-01-01T00:00:00Z", "conditions": [
            {"bucket": "b"}, ["starts-with", "$key", "up/"], ["content-length-range", 1, 10],
            ["eq", "$x-amz-meta-a", "1"]]}"#;
        let policy = PostPolicy::decode(&encode(json)).unwrap();
        assert_eq!(policy.length_range(), Some((1, 10)));
        let now = SystemTime::now();
        let good = fields(&[("bucket", "b"), ("key", "up/x"), ("x-amz-meta-a", "1")]);
        policy.check(&good, now).unwrap();
        let bad_key = fields(&[("bucket", "b"), ("key", "down/x"), ("x-amz-meta-a", "1")]);
        assert!(matches!(
            policy.check(&bad_key, now),
            Err(AuthError::AccessDenied(_))
        ));
        let extra = fields(&[
            ("bucket", "b"),
            ("key", "up/x"),
            ("x-amz-meta-a", "1"),
            ("x-amz-meta-b", "2"),
        ]);
        let err = policy.check(&extra, now).unwrap_err();
        assert!(err.to_string().contains("Extra input fields"), "{err}");
        // S3 reads only ISO 8601's `T` form; Python's str(datetime) is refused.
        let spaced = r#"{"expiration": "2030-01-01 00:00:00.000+00:00", "conditions": []}"#;
        assert!(matches!(
            PostPolicy::decode(&encode(spaced)),
            Err(AuthError::InvalidArgument(_))
        ));
        let expired = r#"{"expiration": "2001-01-01T00:00:00Z", "conditions": []}"#;
        let err = PostPolicy::decode(&encode(expired))
            .unwrap()
            .check(&BTreeMap::new(), now)
            .unwrap_err();
        assert!(err.to_string().contains("Policy expired"), "{err}");
        // Valid up to and including its expiration instant.
        let policy = PostPolicy::decode(&encode(expired)).unwrap();
        let expiration = SystemTime::from(policy.expiration);
        policy.check(&BTreeMap::new(), expiration).unwrap();
        assert!(policy
            .check(&BTreeMap::new(), expiration + Duration::from_millis(1))
            .is_err());
    }

    /// Only Content-Type is a list of values each checked; the signature,
    /// policy, file and x-ignore- fields need no condition.
    #[test]
    fn content_type_lists_and_exempt_fields() {
        let json = r#"{"expiration": "2030-01-01T00:00:00Z", "conditions": [
            ["starts-with", "$key", "up/"], ["starts-with", "$Content-Type", "image/"]]}"#;
        let policy = PostPolicy::decode(&encode(json)).unwrap();
        let now = SystemTime::now();
        let form = |key: &str, content_type: &str| {
            fields(&[
                ("key", key),
                ("content-type", content_type),
                ("policy", "p"),
                ("x-amz-signature", "s"),
                ("signature", "s"),
                ("awsaccesskeyid", "a"),
                ("file", "f"),
                ("bucket", "b"),
                ("x-ignore-note", "n"),
            ])
        };
        policy.check(&form("up/a,b", "image/png"), now).unwrap();
        policy
            .check(&form("up/a", "image/png, image/jpeg"), now)
            .unwrap();
        assert!(policy
            .check(&form("up/a", "image/png, text/plain"), now)
            .is_err());
    }

    /// Answers GetAccessKey and GetUser for the example key.
    struct ExampleKeys;

    impl meta_api::MetaTransport for ExampleKeys {
        fn send(
            &self,
            request: meta_api::AnyRequest,
        ) -> futures::future::BoxFuture<'_, Result<meta_api::AnyResponse, meta_api::MetaError>>
        {
            use crate::auth::testing::{EXAMPLE_ACCESS_KEY, EXAMPLE_SECRET};
            use meta_api::{AnyRequest, AnyResponse};
            let answer = match request {
                AnyRequest::GetAccessKey(r) => {
                    AnyResponse::GetAccessKey((r.access_key == EXAMPLE_ACCESS_KEY).then(|| {
                        meta_api::AccessKeyRecord {
                            access_key: EXAMPLE_ACCESS_KEY.into(),
                            secret_key: EXAMPLE_SECRET.into(),
                            user: "example".into(),
                            created: 0,
                            bucket_grants: None,
                        }
                    }))
                }
                AnyRequest::GetUser(r) => AnyResponse::GetUser(Some(meta_api::UserRecord {
                    name: r.name,
                    created: 0,
                    is_root: false,
                    policy: None,
                })),
                other => panic!("unexpected {other:?}"),
            };
            Box::pin(async move { Ok(answer) })
        }
    }

    /// Forms signed as AWS's SigV4 example and as SigV2, checked against
    /// the example key: each field the signature depends on is checked.
    #[tokio::test]
    async fn forms_are_verified_by_their_signatures() {
        use crate::auth::testing::{EXAMPLE_ACCESS_KEY, EXAMPLE_SECRET};
        let credentials = super::super::cache::Credentials::new(meta_api::MetaClient::new(
            std::sync::Arc::new(ExampleKeys),
        ));
        let json = r#"{"expiration": "2030-01-01T00:00:00Z", "conditions": [
            {"bucket": "b"}, ["starts-with", "$key", ""],
            {"x-amz-credential": "AKIAIOSFODNN7EXAMPLE/20151229/us-east-1/s3/aws4_request"},
            {"x-amz-algorithm": "AWS4-HMAC-SHA256"}, {"x-amz-date": "20151229T000000Z"}]}"#;
        let policy = encode(json);
        let date = AmzDate::parse("20151229T000000Z").unwrap();
        let v4_signature = SigningKey::derive(EXAMPLE_SECRET, date.time, "us-east-1").sign(&policy);
        let v4 = fields(&[
            ("bucket", "b"),
            ("key", "k"),
            ("policy", &policy),
            ("x-amz-algorithm", "AWS4-HMAC-SHA256"),
            (
                "x-amz-credential",
                "AKIAIOSFODNN7EXAMPLE/20151229/us-east-1/s3/aws4_request",
            ),
            ("x-amz-date", "20151229T000000Z"),
            ("x-amz-signature", &v4_signature),
        ]);
        let realm = crate::auth::Realm::new("us-east-1");
        let at = date.time;
        let verify = |form: BTreeMap<String, String>, realm: crate::auth::Realm<'static>| {
            let credentials = &credentials;
            async move { verify_post_form(&form, credentials, &realm, at).await }
        };
        let (_, identity) = verify(v4.clone(), realm).await.expect("valid v4 form");
        assert_eq!(identity.access_key, EXAMPLE_ACCESS_KEY);
        let with = |name: &str, value: &str| {
            let mut form = v4.clone();
            form.insert(name.to_string(), value.to_string());
            form
        };
        for (name, value) in [
            ("x-amz-algorithm", "AWS4-HMAC-SHA1"),
            ("x-amz-date", "20151230T000000Z"),
        ] {
            assert!(
                matches!(
                    verify(with(name, value), realm).await,
                    Err(AuthError::InvalidArgument(_))
                ),
                "{name}"
            );
        }
        assert!(matches!(
            verify(with("x-amz-signature", &"0".repeat(64)), realm).await,
            Err(AuthError::SignatureDoesNotMatch)
        ));

        let v2_policy = encode(
            r#"{"expiration": "2030-01-01T00:00:00Z", "conditions": [{"bucket": "b"}, ["starts-with", "$key", ""]]}"#,
        );
        let v2_signature = super::super::sigv2::sign(EXAMPLE_SECRET, v2_policy.as_bytes());
        let v2 = |signature: &str| {
            fields(&[
                ("bucket", "b"),
                ("key", "k"),
                ("policy", &v2_policy),
                ("awsaccesskeyid", EXAMPLE_ACCESS_KEY),
                ("signature", signature),
            ])
        };
        let (_, identity) = verify(v2(&v2_signature), realm)
            .await
            .expect("valid v2 form");
        assert_eq!(identity.access_key, EXAMPLE_ACCESS_KEY);
        assert!(matches!(
            verify(v2("AAAA"), realm).await,
            Err(AuthError::SignatureDoesNotMatch)
        ));
        let no_sigv2 = crate::auth::Realm {
            sigv2: false,
            ..realm
        };
        assert!(matches!(
            verify(v2(&v2_signature), no_sigv2).await,
            Err(AuthError::InvalidRequest(_))
        ));
        // A form missing its signature or its policy is told which field.
        let missing = |form: BTreeMap<String, String>| async move {
            match verify(form, realm).await {
                Err(AuthError::InvalidArgument(message)) => message,
                other => panic!("{other:?}"),
            }
        };
        let no_signature = missing(fields(&[("policy", &v2_policy)])).await;
        assert!(
            no_signature.contains("field named 'Signature'"),
            "{no_signature}"
        );
        let mut v4_unsigned = v4.clone();
        v4_unsigned.remove("x-amz-signature");
        let no_signature = missing(v4_unsigned).await;
        assert!(no_signature.contains("'X-Amz-Signature'"), "{no_signature}");
        let mut v2_no_policy = v2(&v2_signature);
        v2_no_policy.remove("policy");
        let no_policy = missing(v2_no_policy).await;
        assert!(no_policy.contains("'Policy'"), "{no_policy}");
        // With neither, the form is anonymous.
        let (policy, identity) = verify(fields(&[("key", "k")]), realm).await.unwrap();
        assert!(policy.is_none() && identity.anonymous);
    }
}
