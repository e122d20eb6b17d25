//! Policies as the gateway evaluates them: each parsed once per text and
//! kept while its holder (a bucket, a user) carries the same text.

use access::{MalformedPolicy, Policy};
use meta_api::BucketRecord;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// Parsed policies by holder name, with the text each was parsed from.
#[derive(Default)]
pub struct PolicyCache {
    parsed: Mutex<HashMap<String, (String, Arc<Policy>)>>,
}

impl PolicyCache {
    /// The policy `text` of `holder`, parsed with `parse`; None without one.
    /// A stored text that no longer parses is an error, never an absent
    /// policy (which could grant more, or limit less, than was meant).
    pub fn get(
        &self,
        holder: &str,
        text: Option<&str>,
        parse: impl FnOnce(&str) -> Result<Policy, MalformedPolicy>,
    ) -> Result<Option<Arc<Policy>>, MalformedPolicy> {
        let mut parsed = self.parsed.lock();
        let Some(text) = text else {
            parsed.remove(holder);
            return Ok(None);
        };
        if let Some((cached_text, policy)) = parsed.get(holder) {
            if cached_text == text {
                return Ok(Some(policy.clone()));
            }
        }
        let policy = Arc::new(parse(text)?);
        parsed.insert(holder.to_string(), (text.to_string(), policy.clone()));
        Ok(Some(policy))
    }

    /// The policy of `bucket`, parsed.
    pub fn of_bucket(&self, bucket: &BucketRecord) -> Result<Option<Arc<Policy>>, MalformedPolicy> {
        self.get(&bucket.name, bucket.policy.as_deref(), |text| {
            Policy::parse(text, &bucket.name)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_is_parsed_once_per_text() {
        let cache = PolicyCache::default();
        let text = r#"{"Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"*"}]}"#;
        let first = cache
            .get("u", Some(text), Policy::parse_user)
            .unwrap()
            .unwrap();
        let again = cache
            .get("u", Some(text), |_| panic!("parsed twice"))
            .unwrap()
            .unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        let other = text.replace("GetObject", "PutObject");
        let changed = cache
            .get("u", Some(&other), Policy::parse_user)
            .unwrap()
            .unwrap();
        assert!(!Arc::ptr_eq(&first, &changed));
        assert!(cache.get("u", None, Policy::parse_user).unwrap().is_none());
        assert!(cache
            .get("u", Some("not json"), Policy::parse_user)
            .is_err());
    }
}
