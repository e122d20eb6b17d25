//! Bucket policies as the gateway evaluates them: each parsed once per
//! text and kept while the bucket's record carries the same text.

use access::Policy;
use meta_api::BucketRecord;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// Parsed policies by bucket name, with the text each was parsed from.
#[derive(Default)]
pub struct PolicyCache {
    parsed: Mutex<HashMap<String, (String, Arc<Policy>)>>,
}

impl PolicyCache {
    /// The policy of `bucket`, parsed; None when it has none. A stored text
    /// that no longer parses is an error, never an absent policy (which
    /// could grant more than the owner meant).
    pub fn get(
        &self,
        bucket: &BucketRecord,
    ) -> Result<Option<Arc<Policy>>, access::MalformedPolicy> {
        let mut parsed = self.parsed.lock();
        let Some(text) = &bucket.policy else {
            parsed.remove(&bucket.name);
            return Ok(None);
        };
        if let Some((cached_text, policy)) = parsed.get(&bucket.name) {
            if cached_text == text {
                return Ok(Some(policy.clone()));
            }
        }
        let policy = Arc::new(Policy::parse(text, &bucket.name)?);
        parsed.insert(bucket.name.clone(), (text.clone(), policy.clone()));
        Ok(Some(policy))
    }
}
