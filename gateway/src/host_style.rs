//! Virtual-hosted-style addressing: which bucket a request's Host names
//! (`bucket.domain`), shared by routing and by SigV2, whose string to sign
//! starts with that bucket.

use http::HeaderMap;

/// The host name without port, lower-cased.
fn host_name(headers: &HeaderMap) -> Option<String> {
    let host = headers.get(http::header::HOST)?.to_str().ok()?;
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    Some(name.to_ascii_lowercase())
}

/// The bucket a virtual-hosted-style request names in its Host
/// (`bucket.domain`), when a domain is configured and the Host is under it.
pub fn virtual_host_bucket(headers: &HeaderMap, domain: Option<&str>) -> Option<String> {
    let host = host_name(headers)?;
    let domain = domain?.trim_end_matches('.').to_ascii_lowercase();
    let bucket = host.strip_suffix(&domain)?.strip_suffix('.')?;
    (!bucket.is_empty()).then(|| bucket.to_string())
}
