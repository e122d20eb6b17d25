//! Policy conditions: `{"Operator": {"key": value or [values]}}`, each
//! operator possibly qualified (`ForAnyValue:`, `ForAllValues:`) and made
//! lenient (`...IfExists`). Every operator and key of a statement must hold
//! (AND); any of a key's values may match (OR; NOR for the negated ones).

use super::pattern::Pattern;
use super::{malformed, MalformedPolicy};
use serde_json::Value;
use std::net::IpAddr;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// The values of the condition keys of one request.
pub trait ConditionValues {
    /// The values of `key` (lower-case, `aws:sourceip`); None when the
    /// request has none.
    fn values(&self, key: &str) -> Option<Vec<String>>;

    /// The first value of `key`: policy variables read this.
    fn single(&self, key: &str) -> Option<String> {
        self.values(key)?.into_iter().next()
    }
}

/// How two values compare for the numeric and date operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Compare {
    Equal,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

impl Compare {
    fn holds<T: PartialOrd>(self, request: T, policy: T) -> bool {
        match self {
            Compare::Equal => request == policy,
            Compare::Less => request < policy,
            Compare::LessOrEqual => request <= policy,
            Compare::Greater => request > policy,
            Compare::GreaterOrEqual => request >= policy,
        }
    }
}

/// A condition operator, without its qualifier and IfExists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    /// StringEquals / StringEqualsIgnoreCase (and Not).
    StringEquals {
        /// ...IgnoreCase.
        ignore_case: bool,
    },
    /// StringLike (and Not): `*` and `?` wildcards.
    StringLike,
    /// Numeric* (and NumericNotEquals).
    Numeric(CompareOp),
    /// Date* (and DateNotEquals).
    Date(CompareOp),
    /// Bool.
    Bool,
    /// BinaryEquals: base64 compared as sent.
    Binary,
    /// IpAddress / NotIpAddress: CIDR blocks.
    IpAddress,
    /// ArnEquals / ArnLike (and Not): wildcards in each of the six parts.
    Arn,
    /// Null: whether the key is absent.
    Null,
}

/// A public wrapper of [`Compare`] for [`Operator`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompareOp(Compare);

/// `ForAnyValue:` or `ForAllValues:`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Qualifier {
    AnyValue,
    AllValues,
}

/// One operator on one key with its values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Condition {
    operator: Operator,
    negated: bool,
    if_exists: bool,
    qualifier: Option<Qualifier>,
    key: String,
    values: Vec<String>,
}

/// The operator named `name` (without qualifier and IfExists), negated or not.
fn operator(name: &str) -> Option<(Operator, bool)> {
    use Compare::*;
    let numeric = |c| Operator::Numeric(CompareOp(c));
    let date = |c| Operator::Date(CompareOp(c));
    Some(match name {
        "StringEquals" => (Operator::StringEquals { ignore_case: false }, false),
        "StringNotEquals" => (Operator::StringEquals { ignore_case: false }, true),
        "StringEqualsIgnoreCase" => (Operator::StringEquals { ignore_case: true }, false),
        "StringNotEqualsIgnoreCase" => (Operator::StringEquals { ignore_case: true }, true),
        "StringLike" => (Operator::StringLike, false),
        "StringNotLike" => (Operator::StringLike, true),
        "NumericEquals" => (numeric(Equal), false),
        "NumericNotEquals" => (numeric(Equal), true),
        "NumericLessThan" => (numeric(Less), false),
        "NumericLessThanEquals" => (numeric(LessOrEqual), false),
        "NumericGreaterThan" => (numeric(Greater), false),
        "NumericGreaterThanEquals" => (numeric(GreaterOrEqual), false),
        "DateEquals" => (date(Equal), false),
        "DateNotEquals" => (date(Equal), true),
        "DateLessThan" => (date(Less), false),
        "DateLessThanEquals" => (date(LessOrEqual), false),
        "DateGreaterThan" => (date(Greater), false),
        "DateGreaterThanEquals" => (date(GreaterOrEqual), false),
        "Bool" => (Operator::Bool, false),
        "BinaryEquals" => (Operator::Binary, false),
        "IpAddress" => (Operator::IpAddress, false),
        "NotIpAddress" => (Operator::IpAddress, true),
        "ArnEquals" | "ArnLike" => (Operator::Arn, false),
        "ArnNotEquals" | "ArnNotLike" => (Operator::Arn, true),
        "Null" => (Operator::Null, false),
        _ => return None,
    })
}

/// A date as policies and requests write it: ISO 8601 (RFC 3339, or a
/// bare date) or seconds since the epoch.
fn parse_date(text: &str) -> Option<i128> {
    if let Ok(seconds) = text.parse::<i64>() {
        return Some(i128::from(seconds) * 1_000_000_000);
    }
    if let Ok(time) = OffsetDateTime::parse(text, &Rfc3339) {
        return Some(time.unix_timestamp_nanos());
    }
    let date = time::Date::parse(
        text,
        time::macros::format_description!("[year]-[month]-[day]"),
    )
    .ok()?;
    Some(date.midnight().assume_utc().unix_timestamp_nanos())
}

/// An IP network: `192.0.2.0/24`, `2001:db8::/32`, or one address.
fn parse_network(text: &str) -> Option<ipnet::IpNet> {
    text.parse::<ipnet::IpNet>()
        .ok()
        .or_else(|| text.parse::<IpAddr>().ok().map(ipnet::IpNet::from))
}

fn value_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Parses a statement's `Condition` block.
pub(super) fn parse_block(block: &Value) -> Result<Vec<Condition>, MalformedPolicy> {
    let operators = block
        .as_object()
        .ok_or_else(|| malformed("Condition must be an object"))?;
    let mut conditions = Vec::new();
    for (name, keys) in operators {
        let (qualifier, rest) = if let Some(rest) = name.strip_prefix("ForAnyValue:") {
            (Some(Qualifier::AnyValue), rest)
        } else if let Some(rest) = name.strip_prefix("ForAllValues:") {
            (Some(Qualifier::AllValues), rest)
        } else {
            (None, name.as_str())
        };
        let (base, if_exists) = match rest.strip_suffix("IfExists") {
            Some(base) => (base, true),
            None => (rest, false),
        };
        let (operator, negated) =
            operator(base).ok_or_else(|| malformed(format!("Invalid Condition type : {name}")))?;
        if operator == Operator::Null && (if_exists || qualifier.is_some()) {
            return Err(malformed(format!("Invalid Condition type : {name}")));
        }
        let keys = keys
            .as_object()
            .filter(|k| !k.is_empty())
            .ok_or_else(|| malformed(format!("Condition {name} must name keys")))?;
        for (key, values) in keys {
            let values = match values {
                Value::Array(items) if !items.is_empty() => {
                    items.iter().map(value_text).collect::<Option<Vec<_>>>()
                }
                Value::Array(_) => None,
                single => value_text(single).map(|v| vec![v]),
            }
            .ok_or_else(|| malformed(format!("Invalid Condition value for {key}")))?;
            let valid = values.iter().all(|v| match operator {
                Operator::Numeric(_) => v.parse::<f64>().is_ok(),
                Operator::Date(_) => parse_date(v).is_some() || v.contains("${"),
                Operator::Bool | Operator::Null => v == "true" || v == "false",
                Operator::IpAddress => parse_network(v).is_some(),
                _ => true,
            });
            if !valid {
                return Err(malformed(format!("Invalid Condition value for {key}")));
            }
            conditions.push(Condition {
                operator,
                negated,
                if_exists,
                qualifier,
                key: key.to_ascii_lowercase(),
                values,
            });
        }
    }
    Ok(conditions)
}

/// `text` with its policy variables filled in from `values`; None when one
/// has no value (the condition cannot match it).
fn fill(text: &str, values: &dyn ConditionValues) -> Option<String> {
    if !text.contains("${") {
        return Some(text.to_string());
    }
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Some(out);
        };
        match &after[..end] {
            "*" => out.push('*'),
            "?" => out.push('?'),
            "$" => out.push('$'),
            name => out.push_str(&values.single(&name.to_ascii_lowercase())?),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Some(out)
}

/// Whether the ARN `request` matches the ARN pattern `policy`, part by part.
fn arn_matches(policy: &str, request: &str) -> bool {
    let policy: Vec<&str> = policy.splitn(6, ':').collect();
    let request: Vec<&str> = request.splitn(6, ':').collect();
    policy.len() == request.len()
        && policy
            .iter()
            .zip(&request)
            .all(|(p, r)| Pattern::new(p).matches(r))
}

impl Condition {
    /// Whether one request value matches one policy value (before negation).
    fn matches(&self, request: &str, policy: &str, values: &dyn ConditionValues) -> bool {
        match self.operator {
            Operator::StringEquals { ignore_case } => match fill(policy, values) {
                Some(policy) if ignore_case => policy.to_lowercase() == request.to_lowercase(),
                Some(policy) => policy == request,
                None => false,
            },
            Operator::StringLike => Pattern::new(policy)
                .with_variables(&|name| values.single(name))
                .matches(request),
            Operator::Numeric(CompareOp(compare)) => {
                match (request.parse::<f64>(), policy.parse::<f64>()) {
                    (Ok(r), Ok(p)) => compare.holds(r, p),
                    _ => false,
                }
            }
            Operator::Date(CompareOp(compare)) => {
                let policy = fill(policy, values);
                match (parse_date(request), policy.as_deref().and_then(parse_date)) {
                    (Some(r), Some(p)) => compare.holds(r, p),
                    _ => false,
                }
            }
            Operator::Bool => request.eq_ignore_ascii_case(policy),
            Operator::Binary => request == policy,
            Operator::IpAddress => match (request.parse::<IpAddr>(), parse_network(policy)) {
                (Ok(address), Some(network)) => network.contains(&address),
                _ => false,
            },
            Operator::Arn => arn_matches(policy, request),
            Operator::Null => false,
        }
    }

    /// Whether one request value satisfies the condition (negation applied).
    fn satisfied_by(&self, request: &str, values: &dyn ConditionValues) -> bool {
        let any = self
            .values
            .iter()
            .any(|policy| self.matches(request, policy, values));
        any != self.negated
    }

    /// Whether the condition holds for the request.
    pub(super) fn holds(&self, values: &dyn ConditionValues) -> bool {
        let present = values.values(&self.key).filter(|v| !v.is_empty());
        if self.operator == Operator::Null {
            let wants_absent = self.values.iter().any(|v| v == "true");
            return present.is_none() == wants_absent;
        }
        match (self.qualifier, present) {
            (_, None) if self.if_exists => true,
            (Some(Qualifier::AllValues), None) => true,
            (Some(Qualifier::AnyValue), None) => false,
            (None, None) => self.negated,
            (Some(Qualifier::AllValues), Some(request)) => {
                request.iter().all(|r| self.satisfied_by(r, values))
            }
            (_, Some(request)) => request.iter().any(|r| self.satisfied_by(r, values)),
        }
    }

    /// Whether the condition holds the request to a fixed source (an
    /// address range, an account, an ARN, a VPC...): S3 does not count a
    /// statement so held as public.
    pub(super) fn fixes_the_source(&self) -> bool {
        const SOURCE_KEYS: &[&str] = &[
            "aws:sourceip",
            "aws:sourcearn",
            "aws:sourcevpc",
            "aws:sourcevpce",
            "aws:sourceaccount",
            "aws:sourceowner",
            "aws:principalorgid",
            "aws:principalaccount",
            "aws:userid",
            "s3:dataaccesspointarn",
            "s3:dataaccesspointaccount",
        ];
        let fixed_values = self.values.iter().all(|v| {
            !v.contains(['*', '?'])
                && parse_network(v).is_none_or(|network| network.prefix_len() > 0)
        });
        SOURCE_KEYS.contains(&self.key.as_str())
            && !self.negated
            && !self.if_exists
            && self.qualifier != Some(Qualifier::AllValues)
            && fixed_values
    }
}
