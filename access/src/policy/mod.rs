//! Policies in the IAM policy language for S3, of buckets (with principals,
//! about one bucket) and of users (without principals, about any bucket):
//! parsed and checked once ([`Policy::parse`], [`Policy::parse_user`], with
//! S3's MalformedPolicy reasons), then evaluated per request
//! ([`Policy::evaluate`]): a statement applies when its principal, action,
//! resource and every condition match; an explicit Deny wins over any Allow.

mod condition;
mod pattern;

pub use condition::{ConditionValues, Operator};

use crate::Action;
use condition::Condition;
use pattern::Pattern;
use serde_json::{Map, Value};

/// The longest policy S3 accepts, in bytes.
pub const MAX_POLICY_BYTES: usize = 20 * 1024;

/// Why a policy document is refused (400 MalformedPolicy with this text).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MalformedPolicy(pub String);

fn malformed(message: impl Into<String>) -> MalformedPolicy {
    MalformedPolicy(message.into())
}

/// What a statement does when it applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Grants.
    Allow,
    /// Refuses, whatever else grants.
    Deny,
}

/// Who a statement is about.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Principals {
    /// `"*"` or `{"AWS": "*"}`: everyone, signed or not.
    everyone: bool,
    /// Users named by ARN (`arn:aws:iam::ACCOUNT:user/NAME`) or canonical ID.
    users: Vec<String>,
    canonical_ids: Vec<String>,
}

impl Principals {
    fn matches(&self, user: Option<&str>) -> bool {
        if self.everyone {
            return true;
        }
        let Some(user) = user else { return false };
        self.users.iter().any(|u| u == user)
            || (!self.canonical_ids.is_empty()
                && self.canonical_ids.contains(&crate::canonical_user_id(user)))
    }
}

/// A list a statement names, or every element but those (`Not...`).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Listed<T> {
    Is(T),
    IsNot(T),
}

impl<T> Listed<T> {
    fn holds(&self, test: impl Fn(&T) -> bool) -> bool {
        match self {
            Listed::Is(list) => test(list),
            Listed::IsNot(list) => !test(list),
        }
    }
}

/// One statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    sid: Option<String>,
    effect: Effect,
    principal: Listed<Principals>,
    actions: Listed<Vec<Pattern>>,
    resources: Listed<Vec<Pattern>>,
    conditions: Vec<Condition>,
}

/// A parsed bucket policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    statements: Vec<Statement>,
}

/// The request a policy is evaluated against.
pub struct PolicyRequest<'a> {
    /// The signing user; None when unsigned.
    pub user: Option<&'a str>,
    /// The action.
    pub action: Action,
    /// The resource ARN: `arn:aws:s3:::bucket` or `arn:aws:s3:::bucket/key`.
    pub resource: &'a str,
    /// The condition keys' values.
    pub values: &'a dyn ConditionValues,
}

/// What a policy says of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyDecision {
    /// A statement allows it and none denies it.
    Allow,
    /// A statement denies it.
    Deny,
    /// No statement applies.
    NotApplicable,
}

/// The S3 resource ARN of a bucket, or of a key in it.
pub fn resource_arn(bucket: &str, key: Option<&str>) -> String {
    match key {
        Some(key) => format!("arn:aws:s3:::{bucket}/{key}"),
        None => format!("arn:aws:s3:::{bucket}"),
    }
}

fn one_or_many(value: &Value, what: &str) -> Result<Vec<String>, MalformedPolicy> {
    let strings = |v: &Value| match v {
        Value::String(s) => Ok(s.clone()),
        _ => Err(malformed(format!(
            "{what} must be a string or a list of strings"
        ))),
    };
    match value {
        Value::Array(items) if !items.is_empty() => items.iter().map(strings).collect(),
        Value::Array(_) => Err(malformed(format!("{what} must not be empty"))),
        other => Ok(vec![strings(other)?]),
    }
}

/// The user an AWS principal names: `arn:aws:iam::ACCOUNT:user/NAME`.
fn principal_user(value: &str) -> Option<String> {
    let rest = value.strip_prefix("arn:aws:iam::")?;
    let (account, user) = rest.split_once(":user/")?;
    let valid_account = account.is_empty() || account.bytes().all(|b| b.is_ascii_digit());
    (valid_account && !user.is_empty() && !user.contains(['*', '?'])).then(|| user.to_string())
}

fn parse_principals(value: &Value) -> Result<Principals, MalformedPolicy> {
    let invalid = || malformed("Invalid principal in policy");
    let mut principals = Principals {
        everyone: false,
        users: Vec::new(),
        canonical_ids: Vec::new(),
    };
    match value {
        Value::String(s) if s == "*" => principals.everyone = true,
        Value::Object(map) if !map.is_empty() => {
            for (kind, names) in map {
                for name in one_or_many(names, "Principal").map_err(|_| invalid())? {
                    match kind.as_str() {
                        "AWS" if name == "*" => principals.everyone = true,
                        "AWS" => principals
                            .users
                            .push(principal_user(&name).ok_or_else(invalid)?),
                        "CanonicalUser" => {
                            crate::Grantee::user(&name).map_err(|_| invalid())?;
                            principals.canonical_ids.push(name);
                        }
                        _ => return Err(invalid()),
                    }
                }
            }
        }
        _ => return Err(invalid()),
    }
    Ok(principals)
}

fn parse_actions(value: &Value) -> Result<Vec<Pattern>, MalformedPolicy> {
    let mut patterns = Vec::new();
    for name in one_or_many(value, "Action")? {
        let pattern = Pattern::new(&name.to_ascii_lowercase());
        let known = name == "*"
            || Action::ALL
                .iter()
                .any(|a| pattern.matches(&a.name().to_ascii_lowercase()));
        if !known {
            return Err(malformed("Policy has invalid action"));
        }
        patterns.push(pattern);
    }
    Ok(patterns)
}

/// Whose policy a document is: a bucket's names principals and only that
/// bucket's resources; a user's names no principal (it is the user's).
#[derive(Clone, Copy, Debug)]
enum Holder<'a> {
    Bucket(&'a str),
    User,
}

fn parse_resources(value: &Value, holder: Holder<'_>) -> Result<Vec<Pattern>, MalformedPolicy> {
    let mut patterns = Vec::new();
    for arn in one_or_many(value, "Resource")? {
        let rest = arn
            .strip_prefix("arn:aws:s3:::")
            .or_else(|| (arn == "*").then_some("*"))
            .ok_or_else(|| malformed("Policy has invalid resource"))?;
        // A bucket's resources must be the bucket or under it.
        if let Holder::Bucket(bucket) = holder {
            let named_bucket = rest.split('/').next().unwrap_or_default();
            if !Pattern::new(named_bucket).matches(bucket) {
                return Err(malformed("Policy has invalid resource"));
            }
        }
        let pattern = if arn == "*" {
            "arn:aws:s3:::*"
        } else {
            arn.as_str()
        };
        patterns.push(Pattern::new(pattern));
    }
    Ok(patterns)
}

/// The value of the one key of `map` among `names` (`Action` or `NotAction`).
fn either<'a>(
    map: &'a Map<String, Value>,
    name: &str,
    not_name: &str,
) -> Result<Option<Listed<&'a Value>>, MalformedPolicy> {
    match (map.get(name), map.get(not_name)) {
        (Some(_), Some(_)) => Err(malformed(format!(
            "Statement must not have both {name} and {not_name}"
        ))),
        (Some(v), None) => Ok(Some(Listed::Is(v))),
        (None, Some(v)) => Ok(Some(Listed::IsNot(v))),
        (None, None) => Ok(None),
    }
}

fn listed<T>(
    value: Listed<&Value>,
    parse: impl Fn(&Value) -> Result<T, MalformedPolicy>,
) -> Result<Listed<T>, MalformedPolicy> {
    Ok(match value {
        Listed::Is(v) => Listed::Is(parse(v)?),
        Listed::IsNot(v) => Listed::IsNot(parse(v)?),
    })
}

fn parse_statement(value: &Value, holder: Holder<'_>) -> Result<Statement, MalformedPolicy> {
    let map = value
        .as_object()
        .ok_or_else(|| malformed("Statement must be an object"))?;
    for key in map.keys() {
        let known = [
            "Sid",
            "Effect",
            "Principal",
            "NotPrincipal",
            "Action",
            "NotAction",
            "Resource",
            "NotResource",
            "Condition",
        ];
        if !known.contains(&key.as_str()) {
            return Err(malformed(format!("Unknown field {key}")));
        }
    }
    let sid = match map.get("Sid") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(malformed("Sid must be a string")),
    };
    let effect = match map.get("Effect").and_then(Value::as_str) {
        Some("Allow") => Effect::Allow,
        Some("Deny") => Effect::Deny,
        Some(other) => return Err(malformed(format!("Invalid effect: {other}"))),
        None => return Err(malformed("Missing required field Effect")),
    };
    let principal = match (holder, either(map, "Principal", "NotPrincipal")?) {
        (Holder::Bucket(_), Some(principal)) => listed(principal, parse_principals)?,
        (Holder::Bucket(_), None) => return Err(malformed("Missing required field Principal")),
        (Holder::User, None) => Listed::Is(Principals {
            everyone: true,
            users: Vec::new(),
            canonical_ids: Vec::new(),
        }),
        (Holder::User, Some(_)) => return Err(malformed("Has prohibited field Principal")),
    };
    let actions = either(map, "Action", "NotAction")?
        .ok_or_else(|| malformed("Missing required field Action"))?;
    let resources = either(map, "Resource", "NotResource")?
        .ok_or_else(|| malformed("Missing required field Resource"))?;
    let conditions = match map.get("Condition") {
        None => Vec::new(),
        Some(value) => condition::parse_block(value)?,
    };
    Ok(Statement {
        sid,
        effect,
        principal,
        actions: listed(actions, parse_actions)?,
        resources: listed(resources, |v| parse_resources(v, holder))?,
        conditions,
    })
}

impl Policy {
    /// Parses and checks the policy `text` of `bucket` as S3 does.
    pub fn parse(text: &str, bucket: &str) -> Result<Self, MalformedPolicy> {
        Self::parse_for(text, Holder::Bucket(bucket))
    }

    /// Parses and checks a user's policy: no principals, any bucket.
    pub fn parse_user(text: &str) -> Result<Self, MalformedPolicy> {
        Self::parse_for(text, Holder::User)
    }

    /// The policy of an access key limited to `buckets`: in each, every
    /// action that only reads (`Right::Read`) or every action
    /// (`Right::Write`); nothing elsewhere.
    pub fn of_bucket_rights<'a>(
        buckets: impl IntoIterator<Item = (&'a str, crate::Right)>,
    ) -> Self {
        let statements = buckets
            .into_iter()
            .map(|(bucket, right)| {
                let actions = match right {
                    crate::Right::Write => vec![Pattern::new("*")],
                    crate::Right::Read => Action::ALL
                        .iter()
                        .filter(|a| a.right() == crate::Right::Read)
                        .map(|a| Pattern::new(&a.name().to_ascii_lowercase()))
                        .collect(),
                };
                let bucket_arn = resource_arn(bucket, None);
                Statement {
                    sid: None,
                    effect: Effect::Allow,
                    principal: Listed::Is(Principals {
                        everyone: true,
                        users: Vec::new(),
                        canonical_ids: Vec::new(),
                    }),
                    actions: Listed::Is(actions),
                    resources: Listed::Is(vec![
                        Pattern::literal(&bucket_arn),
                        Pattern::literal(&format!("{bucket_arn}/")).then_any(),
                    ]),
                    conditions: Vec::new(),
                }
            })
            .collect();
        Self { statements }
    }

    fn parse_for(text: &str, holder: Holder<'_>) -> Result<Self, MalformedPolicy> {
        if text.len() > MAX_POLICY_BYTES {
            return Err(malformed("Policies must be at most 20 KB"));
        }
        if !text.trim_start().starts_with('{') {
            return Err(malformed(
                "Policies must be valid JSON and the first byte must be '{'",
            ));
        }
        let document: Value = serde_json::from_str(text)
            .map_err(|_| malformed("Policies must be valid JSON and the first byte must be '{'"))?;
        let map = document
            .as_object()
            .ok_or_else(|| malformed("Policies must be a JSON object"))?;
        for key in map.keys() {
            if !["Version", "Id", "Statement"].contains(&key.as_str()) {
                return Err(malformed(format!("Unknown field {key}")));
            }
        }
        match map.get("Version").and_then(Value::as_str) {
            None | Some("2012-10-17") | Some("2008-10-17") => {}
            Some(_) => return Err(malformed("The policy Version is not supported")),
        }
        let statements = match map.get("Statement") {
            Some(Value::Array(items)) if !items.is_empty() => items
                .iter()
                .map(|s| parse_statement(s, holder))
                .collect::<Result<Vec<_>, _>>()?,
            Some(single @ Value::Object(_)) => vec![parse_statement(single, holder)?],
            _ => return Err(malformed("Missing required field Statement")),
        };
        Ok(Self { statements })
    }

    /// What the policy says of `request`.
    pub fn evaluate(&self, request: &PolicyRequest<'_>) -> PolicyDecision {
        let mut allowed = false;
        for statement in &self.statements {
            if statement.applies(request) {
                match statement.effect {
                    Effect::Deny => return PolicyDecision::Deny,
                    Effect::Allow => allowed = true,
                }
            }
        }
        if allowed {
            PolicyDecision::Allow
        } else {
            PolicyDecision::NotApplicable
        }
    }

    /// Whether the policy grants access to anyone: an Allow statement for
    /// every principal not held to a fixed source (S3's definition, used by
    /// BlockPublicPolicy, RestrictPublicBuckets and GetBucketPolicyStatus).
    pub fn is_public(&self) -> bool {
        self.statements.iter().any(|s| {
            let everyone = match &s.principal {
                Listed::Is(p) => p.everyone,
                Listed::IsNot(_) => true,
            };
            s.effect == Effect::Allow
                && everyone
                && !s.conditions.iter().any(Condition::fixes_the_source)
        })
    }

    /// The statement IDs, in order (for logs).
    pub fn statement_ids(&self) -> impl Iterator<Item = Option<&str>> {
        self.statements.iter().map(|s| s.sid.as_deref())
    }
}

impl Statement {
    fn applies(&self, request: &PolicyRequest<'_>) -> bool {
        let action = request.action.name().to_ascii_lowercase();
        let variables = |name: &str| request.values.single(name);
        self.principal.holds(|p| p.matches(request.user))
            && self
                .actions
                .holds(|patterns| patterns.iter().any(|p| p.matches(&action)))
            && self.resources.holds(|patterns| {
                patterns
                    .iter()
                    .any(|p| p.with_variables(&variables).matches(request.resource))
            })
            && self.conditions.iter().all(|c| c.holds(request.values))
    }
}

#[cfg(test)]
mod tests;
