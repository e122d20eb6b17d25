use super::*;
use std::collections::HashMap;

/// Condition values from a map.
struct Values(HashMap<&'static str, Vec<&'static str>>);

impl ConditionValues for Values {
    fn values(&self, key: &str) -> Option<Vec<String>> {
        self.0
            .get(key)
            .map(|v| v.iter().map(|s| s.to_string()).collect())
    }
}

fn values(pairs: &[(&'static str, &[&'static str])]) -> Values {
    Values(pairs.iter().map(|(k, v)| (*k, v.to_vec())).collect())
}

fn parse(text: &str) -> Policy {
    Policy::parse(text, "b").unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn decide(
    policy: &Policy,
    user: Option<&str>,
    action: Action,
    key: Option<&str>,
    values: &Values,
) -> PolicyDecision {
    let resource = resource_arn("b", key);
    policy.evaluate(&PolicyRequest {
        user,
        action,
        resource: &resource,
        values,
    })
}

fn statement(body: &str) -> Policy {
    parse(&format!(
        r#"{{"Version":"2012-10-17","Statement":[{{{body}}}]}}"#
    ))
}

use PolicyDecision::{Allow, Deny, NotApplicable};

#[test]
fn public_read_of_a_prefix() {
    let policy = statement(
        r#""Sid":"PublicRead","Effect":"Allow","Principal":"*","Action":["s3:GetObject"],
           "Resource":"arn:aws:s3:::b/public/*""#,
    );
    let none = values(&[]);
    assert_eq!(
        decide(
            &policy,
            None,
            Action::GetObject,
            Some("public/a.txt"),
            &none
        ),
        Allow
    );
    assert_eq!(
        decide(
            &policy,
            Some("bob"),
            Action::GetObject,
            Some("public/a"),
            &none
        ),
        Allow
    );
    assert_eq!(
        decide(&policy, None, Action::GetObject, Some("private/a"), &none),
        NotApplicable
    );
    assert_eq!(
        decide(&policy, None, Action::PutObject, Some("public/a"), &none),
        NotApplicable
    );
    assert_eq!(
        decide(&policy, None, Action::ListBucket, None, &none),
        NotApplicable
    );
    assert!(policy.is_public());
    assert_eq!(
        policy.statement_ids().collect::<Vec<_>>(),
        [Some("PublicRead")]
    );
}

#[test]
fn an_explicit_deny_wins() {
    let policy = parse(
        r#"{"Statement":[
            {"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:user/bob"},"Action":"s3:*","Resource":["arn:aws:s3:::b","arn:aws:s3:::b/*"]},
            {"Effect":"Deny","Principal":"*","Action":"s3:DeleteObject","Resource":"arn:aws:s3:::b/*"}]}"#,
    );
    let none = values(&[]);
    assert_eq!(
        decide(&policy, Some("bob"), Action::PutObject, Some("k"), &none),
        Allow
    );
    assert_eq!(
        decide(&policy, Some("bob"), Action::ListBucket, None, &none),
        Allow
    );
    assert_eq!(
        decide(&policy, Some("bob"), Action::DeleteObject, Some("k"), &none),
        Deny
    );
    assert_eq!(
        decide(
            &policy,
            Some("alice"),
            Action::DeleteObject,
            Some("k"),
            &none
        ),
        Deny
    );
    assert_eq!(
        decide(&policy, Some("alice"), Action::GetObject, Some("k"), &none),
        NotApplicable
    );
    assert!(!policy.is_public());
}

#[test]
fn not_principal_not_action_not_resource() {
    let policy = statement(
        r#""Effect":"Deny","NotPrincipal":{"AWS":"arn:aws:iam::1:user/admin"},
           "NotAction":["s3:Get*","s3:List*"],"NotResource":"arn:aws:s3:::b/scratch/*""#,
    );
    let none = values(&[]);
    assert_eq!(
        decide(&policy, Some("bob"), Action::PutObject, Some("k"), &none),
        Deny
    );
    assert_eq!(
        decide(
            &policy,
            Some("bob"),
            Action::PutObject,
            Some("scratch/k"),
            &none
        ),
        NotApplicable
    );
    assert_eq!(
        decide(&policy, Some("bob"), Action::GetObject, Some("k"), &none),
        NotApplicable
    );
    assert_eq!(
        decide(&policy, Some("admin"), Action::PutObject, Some("k"), &none),
        NotApplicable
    );
    assert_eq!(
        decide(&policy, None, Action::PutObject, Some("k"), &none),
        Deny
    );
}

#[test]
fn canonical_user_principals() {
    let id = crate::canonical_user_id("carol");
    let policy = statement(&format!(
        r#""Effect":"Allow","Principal":{{"CanonicalUser":"{id}"}},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*""#
    ));
    let none = values(&[]);
    assert_eq!(
        decide(&policy, Some("carol"), Action::GetObject, Some("k"), &none),
        Allow
    );
    assert_eq!(
        decide(&policy, Some("dave"), Action::GetObject, Some("k"), &none),
        NotApplicable
    );
}

/// Each operator family, with values that match and values that do not.
#[test]
fn condition_operators() {
    let cases: &[ConditionCase] = &[
        (
            r#""StringEquals":{"s3:prefix":["home/","logs/"]}"#,
            &[("s3:prefix", &["logs/"])],
            true,
        ),
        (
            r#""StringEquals":{"s3:prefix":"home/"}"#,
            &[("s3:prefix", &["Home/"])],
            false,
        ),
        (
            r#""StringEqualsIgnoreCase":{"s3:prefix":"home/"}"#,
            &[("s3:prefix", &["HOME/"])],
            true,
        ),
        (
            r#""StringNotEquals":{"s3:prefix":"home/"}"#,
            &[("s3:prefix", &["logs/"])],
            true,
        ),
        (
            r#""StringNotEquals":{"s3:prefix":"home/"}"#,
            &[("s3:prefix", &["home/"])],
            false,
        ),
        (
            r#""StringLike":{"s3:prefix":"home/*"}"#,
            &[("s3:prefix", &["home/x/y"])],
            true,
        ),
        (
            r#""StringNotLike":{"s3:prefix":"home/*"}"#,
            &[("s3:prefix", &["home/x"])],
            false,
        ),
        (
            r#""NumericLessThanEquals":{"s3:max-keys":"10"}"#,
            &[("s3:max-keys", &["10"])],
            true,
        ),
        (
            r#""NumericLessThan":{"s3:max-keys":10}"#,
            &[("s3:max-keys", &["10"])],
            false,
        ),
        (
            r#""NumericGreaterThan":{"s3:max-keys":"10"}"#,
            &[("s3:max-keys", &["11"])],
            true,
        ),
        (
            r#""NumericNotEquals":{"s3:max-keys":"10"}"#,
            &[("s3:max-keys", &["10"])],
            false,
        ),
        (
            r#""DateLessThan":{"aws:CurrentTime":"2027-01-01T00:00:00Z"}"#,
            &[("aws:currenttime", &["2026-12-04T12:00:00Z"])],
            true,
        ),
        (
            r#""DateGreaterThan":{"aws:CurrentTime":"2027-01-01"}"#,
            &[("aws:currenttime", &["2026-12-04T12:00:00Z"])],
            false,
        ),
        (
            r#""DateGreaterThanEquals":{"aws:EpochTime":"1700000000"}"#,
            &[("aws:epochtime", &["1800000000"])],
            true,
        ),
        (
            r#""Bool":{"aws:SecureTransport":"false"}"#,
            &[("aws:securetransport", &["false"])],
            true,
        ),
        (
            r#""Bool":{"aws:SecureTransport":true}"#,
            &[("aws:securetransport", &["false"])],
            false,
        ),
        (
            r#""IpAddress":{"aws:SourceIp":["10.0.0.0/8","2001:db8::/32"]}"#,
            &[("aws:sourceip", &["10.1.2.3"])],
            true,
        ),
        (
            r#""IpAddress":{"aws:SourceIp":"2001:db8::/32"}"#,
            &[("aws:sourceip", &["2001:db8::1"])],
            true,
        ),
        (
            r#""IpAddress":{"aws:SourceIp":"10.0.0.0/8"}"#,
            &[("aws:sourceip", &["192.0.2.1"])],
            false,
        ),
        (
            r#""NotIpAddress":{"aws:SourceIp":"10.0.0.0/8"}"#,
            &[("aws:sourceip", &["192.0.2.1"])],
            true,
        ),
        (
            r#""ArnLike":{"aws:SourceArn":"arn:aws:sns:*:123:topic-*"}"#,
            &[("aws:sourcearn", &["arn:aws:sns:us-east-1:123:topic-a"])],
            true,
        ),
        (
            r#""ArnEquals":{"aws:SourceArn":"arn:aws:sns:*:123:topic"}"#,
            &[("aws:sourcearn", &["arn:aws:sns:eu:999:topic"])],
            false,
        ),
        (
            r#""BinaryEquals":{"k":"QmluYXJ5"}"#,
            &[("k", &["QmluYXJ5"])],
            true,
        ),
        (
            r#""Null":{"s3:x-amz-server-side-encryption":"true"}"#,
            &[],
            true,
        ),
        (
            r#""Null":{"s3:x-amz-server-side-encryption":"false"}"#,
            &[],
            false,
        ),
        (
            r#""Null":{"s3:x-amz-server-side-encryption":"true"}"#,
            &[("s3:x-amz-server-side-encryption", &["AES256"])],
            false,
        ),
        // A missing key: false, but true for negated and IfExists operators.
        (r#""StringEquals":{"s3:x-amz-acl":"private"}"#, &[], false),
        (
            r#""StringNotEquals":{"s3:x-amz-acl":"public-read"}"#,
            &[],
            true,
        ),
        (
            r#""StringEqualsIfExists":{"s3:x-amz-acl":"private"}"#,
            &[],
            true,
        ),
        (
            r#""StringEqualsIfExists":{"s3:x-amz-acl":"private"}"#,
            &[("s3:x-amz-acl", &["public-read"])],
            false,
        ),
        // Set qualifiers over multi-valued keys.
        (
            r#""ForAllValues:StringEquals":{"s3:requestobjecttagkeys":["a","b"]}"#,
            &[("s3:requestobjecttagkeys", &["a", "b"])],
            true,
        ),
        (
            r#""ForAllValues:StringEquals":{"s3:requestobjecttagkeys":["a","b"]}"#,
            &[("s3:requestobjecttagkeys", &["a", "c"])],
            false,
        ),
        (
            r#""ForAllValues:StringEquals":{"s3:requestobjecttagkeys":["a"]}"#,
            &[],
            true,
        ),
        (
            r#""ForAnyValue:StringEquals":{"s3:requestobjecttagkeys":["c"]}"#,
            &[("s3:requestobjecttagkeys", &["a", "c"])],
            true,
        ),
        (
            r#""ForAnyValue:StringEquals":{"s3:requestobjecttagkeys":["c"]}"#,
            &[],
            false,
        ),
        // Several keys and operators: all must hold.
        (
            r#""StringEquals":{"s3:prefix":"a","s3:delimiter":"/"}"#,
            &[("s3:prefix", &["a"]), ("s3:delimiter", &["|"])],
            false,
        ),
        // Policy variables in values.
        (
            r#""StringLike":{"s3:prefix":"home/${aws:username}/*"}"#,
            &[("s3:prefix", &["home/bob/x"]), ("aws:username", &["bob"])],
            true,
        ),
        (
            r#""StringEquals":{"s3:prefix":"${aws:username}"}"#,
            &[("s3:prefix", &["eve"]), ("aws:username", &["bob"])],
            false,
        ),
    ];
    check_conditions(cases);
}

/// (condition, request values, whether it holds)
type ConditionCase = (
    &'static str,
    &'static [(&'static str, &'static [&'static str])],
    bool,
);

/// Checks that each condition holds exactly when its case says.
fn check_conditions(cases: &[ConditionCase]) {
    for (condition, request, expected) in cases {
        let policy = statement(&format!(
            r#""Effect":"Allow","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::b","Condition":{{{condition}}}"#
        ));
        let got = decide(
            &policy,
            Some("bob"),
            Action::ListBucket,
            None,
            &values(request),
        );
        assert_eq!(got == Allow, *expected, "{condition} with {request:?}");
    }
}

/// Every comparison operator at its boundary (equal values), and every
/// operator name with a value on each side.
#[test]
fn every_operator_at_its_boundary() {
    const KEYS: &[(&str, &[&str])] = &[("s3:max-keys", &["10"])];
    const NOW: &[(&str, &[&str])] = &[("aws:currenttime", &["2026-12-04T12:00:00Z"])];
    const ARN: &[(&str, &[&str])] = &[("aws:sourcearn", &["arn:aws:sns:eu:123:topic"])];
    const PREFIX: &[(&str, &[&str])] = &[("s3:prefix", &["HOME/"])];
    check_conditions(&[
        (r#""NumericEquals":{"s3:max-keys":"10"}"#, KEYS, true),
        (r#""NumericEquals":{"s3:max-keys":"11"}"#, KEYS, false),
        (r#""NumericNotEquals":{"s3:max-keys":"11"}"#, KEYS, true),
        (r#""NumericLessThan":{"s3:max-keys":"11"}"#, KEYS, true),
        (
            r#""NumericLessThanEquals":{"s3:max-keys":"9"}"#,
            KEYS,
            false,
        ),
        (r#""NumericGreaterThan":{"s3:max-keys":"10"}"#, KEYS, false),
        (r#""NumericGreaterThan":{"s3:max-keys":"9"}"#, KEYS, true),
        (
            r#""NumericGreaterThanEquals":{"s3:max-keys":"10"}"#,
            KEYS,
            true,
        ),
        (
            r#""NumericGreaterThanEquals":{"s3:max-keys":"11"}"#,
            KEYS,
            false,
        ),
        (
            r#""DateEquals":{"aws:CurrentTime":"2026-12-04T12:00:00Z"}"#,
            NOW,
            true,
        ),
        (
            r#""DateEquals":{"aws:CurrentTime":"2026-12-04T12:00:01Z"}"#,
            NOW,
            false,
        ),
        (
            r#""DateNotEquals":{"aws:CurrentTime":"2026-12-04T12:00:00Z"}"#,
            NOW,
            false,
        ),
        (
            r#""DateNotEquals":{"aws:CurrentTime":"2026-12-04T12:00:01Z"}"#,
            NOW,
            true,
        ),
        (
            r#""DateLessThan":{"aws:CurrentTime":"2026-12-04T12:00:00Z"}"#,
            NOW,
            false,
        ),
        (
            r#""DateLessThanEquals":{"aws:CurrentTime":"2026-12-04T12:00:00Z"}"#,
            NOW,
            true,
        ),
        (
            r#""DateLessThanEquals":{"aws:CurrentTime":"2026-12-04T11:59:59Z"}"#,
            NOW,
            false,
        ),
        (
            r#""DateGreaterThan":{"aws:CurrentTime":"2026-12-04T12:00:00Z"}"#,
            NOW,
            false,
        ),
        (
            r#""DateGreaterThan":{"aws:CurrentTime":"2026-12-04T11:59:59Z"}"#,
            NOW,
            true,
        ),
        (
            r#""DateGreaterThanEquals":{"aws:CurrentTime":"2026-12-04T12:00:00Z"}"#,
            NOW,
            true,
        ),
        (
            r#""DateGreaterThanEquals":{"aws:CurrentTime":"2026-12-04T12:00:01Z"}"#,
            NOW,
            false,
        ),
        (
            r#""StringNotEqualsIgnoreCase":{"s3:prefix":"home/"}"#,
            PREFIX,
            false,
        ),
        (
            r#""StringNotEqualsIgnoreCase":{"s3:prefix":"logs/"}"#,
            PREFIX,
            true,
        ),
        (r#""StringLike":{"s3:prefix":"HOME?"}"#, PREFIX, true),
        (r#""StringNotLike":{"s3:prefix":"LOGS*"}"#, PREFIX, true),
        (
            r#""ArnEquals":{"aws:SourceArn":"arn:aws:sns:eu:123:topic"}"#,
            ARN,
            true,
        ),
        (
            r#""ArnLike":{"aws:SourceArn":"arn:aws:sns:eu:123:other"}"#,
            ARN,
            false,
        ),
        (
            r#""ArnNotEquals":{"aws:SourceArn":"arn:aws:sns:*:123:topic"}"#,
            ARN,
            false,
        ),
        (
            r#""ArnNotEquals":{"aws:SourceArn":"arn:aws:sns:*:999:topic"}"#,
            ARN,
            true,
        ),
        (
            r#""ArnNotLike":{"aws:SourceArn":"arn:aws:sns:eu:*:top*"}"#,
            ARN,
            false,
        ),
        (
            r#""ArnNotLike":{"aws:SourceArn":"arn:aws:s3:eu:*:top*"}"#,
            ARN,
            true,
        ),
        (
            r#""BinaryEquals":{"k":"QmluYXJ5"}"#,
            &[("k", &["QmluYXJ6"])],
            false,
        ),
        // Epoch seconds against an ISO 8601 time: 2026-12-04T12:00:00Z.
        (
            r#""DateEquals":{"aws:CurrentTime":"1796385600"}"#,
            NOW,
            true,
        ),
        (
            r#""DateLessThan":{"aws:CurrentTime":"1796385601"}"#,
            NOW,
            true,
        ),
        (
            r#""DateGreaterThan":{"aws:CurrentTime":"1796385599"}"#,
            NOW,
            true,
        ),
    ]);
}

/// Variables anywhere in a value, with text around them, and the escapes
/// `${*}`, `${?}` and `${$}` for literal characters.
#[test]
fn policy_variables_in_values() {
    const BOB: &[(&str, &[&str])] = &[("s3:prefix", &["home/bob/x"]), ("aws:username", &["bob"])];
    check_conditions(&[
        (
            r#""StringEquals":{"s3:prefix":"home/${aws:username}/x"}"#,
            BOB,
            true,
        ),
        (
            r#""StringEquals":{"s3:prefix":"home/${aws:username}/y"}"#,
            BOB,
            false,
        ),
        (
            r#""StringEquals":{"aws:username":"${aws:username}"}"#,
            BOB,
            true,
        ),
        (
            r#""StringEquals":{"s3:prefix":"home/${aws:userid}/x"}"#,
            BOB,
            false,
        ),
        (
            r#""StringEquals":{"s3:prefix":"a${*}b${?}c${$}d"}"#,
            &[("s3:prefix", &["a*b?c$d"])],
            true,
        ),
        (
            r#""StringEquals":{"s3:prefix":"a${*"}"#,
            &[("s3:prefix", &["a${*"])],
            true,
        ),
    ]);
}

#[test]
fn condition_values_must_suit_their_operator() {
    let parse_condition = |condition: &str| {
        Policy::parse(
            &format!(
                r#"{{"Statement":[{{"Effect":"Allow","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::b","Condition":{{{condition}}}}}]}}"#
            ),
            "b",
        )
    };
    for condition in [
        r#""NumericEquals":{"s3:max-keys":"ten"}"#,
        r#""DateEquals":{"aws:CurrentTime":"yesterday"}"#,
        r#""Bool":{"aws:SecureTransport":"yes"}"#,
        r#""Null":{"s3:x-amz-acl":"maybe"}"#,
        r#""StringEquals":{"s3:prefix":[]}"#,
        r#""StringEquals":{"s3:prefix":{"a":1}}"#,
        r#""StringEquals":{}"#,
    ] {
        let err = parse_condition(condition).expect_err(condition);
        assert!(err.0.contains("Condition"), "{condition}: {}", err.0);
    }
    for condition in [
        r#""NullIfExists":{"k":"true"}"#,
        r#""ForAnyValue:Null":{"k":"true"}"#,
    ] {
        let err = parse_condition(condition).expect_err(condition);
        assert!(
            err.0.contains("Invalid Condition type"),
            "{condition}: {}",
            err.0
        );
    }
}

#[test]
fn a_single_statement_may_be_an_object() {
    let policy = parse(
        r#"{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}}"#,
    );
    assert_eq!(
        decide(&policy, None, Action::GetObject, Some("k"), &values(&[])),
        Allow
    );
}

#[test]
fn resources_with_variables() {
    let policy = statement(
        r#""Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::b/home/${aws:username}/*""#,
    );
    let bob = values(&[("aws:username", &["bob"])]);
    assert_eq!(
        decide(
            &policy,
            Some("bob"),
            Action::PutObject,
            Some("home/bob/x"),
            &bob
        ),
        Allow
    );
    assert_eq!(
        decide(
            &policy,
            Some("bob"),
            Action::PutObject,
            Some("home/eve/x"),
            &bob
        ),
        NotApplicable
    );
    let anonymous = values(&[]);
    assert_eq!(
        decide(
            &policy,
            None,
            Action::PutObject,
            Some("home//x"),
            &anonymous
        ),
        NotApplicable
    );
}

#[test]
fn public_means_anyone_without_a_fixed_source() {
    let public = |condition: &str| {
        statement(&format!(
            r#""Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"{condition}"#
        ))
        .is_public()
    };
    assert!(public(""));
    assert!(!public(
        r#","Condition":{"IpAddress":{"aws:SourceIp":"192.0.2.0/24"}}"#
    ));
    assert!(public(
        r#","Condition":{"IpAddress":{"aws:SourceIp":"0.0.0.0/0"}}"#
    ));
    assert!(public(
        r#","Condition":{"StringLike":{"aws:SourceVpc":"vpc-*"}}"#
    ));
    assert!(!public(
        r#","Condition":{"StringEquals":{"aws:SourceVpc":"vpc-1"}}"#
    ));
    assert!(public(r#","Condition":{"StringEquals":{"s3:prefix":"x"}}"#));
    let deny = statement(
        r#""Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::b/*""#,
    );
    assert!(!deny.is_public());
}

#[test]
fn malformed_policies_are_refused_with_a_reason() {
    let cases = [
        ("not json", "first byte"),
        ("{", "valid JSON"),
        (r#"{"Statement":[]}"#, "Statement"),
        (
            r#"{"Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}"#,
            "Principal",
        ),
        (
            r#"{"Statement":[{"Effect":"Maybe","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}"#,
            "effect",
        ),
        (
            r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:Fly","Resource":"arn:aws:s3:::b/*"}]}"#,
            "invalid action",
        ),
        (
            r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::other/*"}]}"#,
            "invalid resource",
        ),
        (
            r#"{"Statement":[{"Effect":"Allow","Principal":{"AWS":"bob"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}"#,
            "Invalid principal",
        ),
        (
            r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringMaybe":{"k":"v"}}}]}"#,
            "Condition type",
        ),
        (
            r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"IpAddress":{"aws:SourceIp":"nowhere"}}}]}"#,
            "Condition value",
        ),
        (
            r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","NotAction":"s3:PutObject","Resource":"arn:aws:s3:::b/*"}]}"#,
            "both",
        ),
        (
            r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Extra":1}]}"#,
            "Unknown field",
        ),
        (
            r#"{"Version":"2020-01-01","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}"#,
            "Version",
        ),
    ];
    for (text, reason) in cases {
        let err = Policy::parse(text, "b").expect_err(text);
        assert!(err.0.contains(reason), "{text}: {}", err.0);
    }
}

#[test]
fn principals_must_be_everyone_users_or_canonical_ids() {
    let with_principal = |principal: &str| {
        format!(
            r#"{{"Statement":[{{"Effect":"Allow","Principal":{principal},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}}]}}"#
        )
    };
    for bad in [
        r#""bob""#,
        "{}",
        r#"{"AWS":[]}"#,
        r#"{"AWS":"arn:aws:iam::12ab:user/bob"}"#,
        r#"{"AWS":"arn:aws:iam::123456789012:user/"}"#,
        r#"{"AWS":"arn:aws:iam::123456789012:user/b*"}"#,
        r#"{"AWS":"arn:aws:iam::123456789012:role/bob"}"#,
        r#"{"Service":"s3.amazonaws.com"}"#,
        r#"{"CanonicalUser":"abc"}"#,
    ] {
        let err = Policy::parse(&with_principal(bad), "b").expect_err(bad);
        assert!(err.0.contains("Invalid principal"), "{bad}: {}", err.0);
    }
    let none = values(&[]);
    let everyone = parse(&with_principal(r#"{"AWS":"*"}"#));
    assert_eq!(
        decide(&everyone, None, Action::GetObject, Some("k"), &none),
        Allow
    );
    for user in [
        "arn:aws:iam::123456789012:user/bob",
        "arn:aws:iam:::user/bob",
    ] {
        let bob = parse(&with_principal(&format!(r#"{{"AWS":["{user}"]}}"#)));
        assert_eq!(
            decide(&bob, Some("bob"), Action::GetObject, Some("k"), &none),
            Allow,
            "{user}"
        );
        assert_eq!(
            decide(&bob, None, Action::GetObject, Some("k"), &none),
            NotApplicable
        );
    }
}

#[test]
fn lists_must_not_be_empty_and_star_is_every_resource() {
    let err = Policy::parse(
        r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":[],"Resource":"arn:aws:s3:::b/*"}]}"#,
        "b",
    )
    .expect_err("empty Action");
    assert!(err.0.contains("must not be empty"), "{}", err.0);
    let star = statement(r#""Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"*""#);
    let none = values(&[]);
    assert_eq!(
        decide(&star, None, Action::GetObject, Some("any/key"), &none),
        Allow
    );
    assert_eq!(decide(&star, None, Action::ListBucket, None, &none), Allow);
}

#[test]
fn policies_may_be_up_to_20_kb() {
    // S3's documented limit, written out rather than read from the constant.
    const S3_LIMIT: usize = 20_480;
    let sized = |bytes: usize| {
        let head = r#"{"Id":""#;
        let tail = r#"","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}"#;
        format!(
            "{head}{}{tail}",
            "x".repeat(bytes - head.len() - tail.len())
        )
    };
    assert_eq!(sized(S3_LIMIT).len(), S3_LIMIT);
    assert!(Policy::parse(&sized(S3_LIMIT), "b").is_ok());
    let err = Policy::parse(&sized(S3_LIMIT + 1), "b").expect_err("too long");
    assert!(err.0.contains("20 KB"), "{}", err.0);
}
