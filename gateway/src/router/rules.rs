//! The conditions a routing rule of the endpoint table may add to its
//! method and level: sub-resource keywords, query values and headers.

use super::RouteInput;

/// The query has parameter `name` (with or without a value): `?cors`.
pub fn query(name: &'static str) -> impl Fn(&RouteInput<'_>) -> bool {
    move |input| input.query.has(name)
}

/// The query has no parameter `name`.
pub fn no_query(name: &'static str) -> impl Fn(&RouteInput<'_>) -> bool {
    move |input| !input.query.has(name)
}

/// Query parameter `name` has `value`: `?list-type=2`.
pub fn query_is(name: &'static str, value: &'static str) -> impl Fn(&RouteInput<'_>) -> bool {
    move |input| input.query.get(name) == Some(value)
}

/// The request has header `name`: `x-amz-copy-source`.
pub fn header(name: &'static str) -> impl Fn(&RouteInput<'_>) -> bool {
    move |input| input.headers.contains_key(name)
}

/// The body is an HTML form (`multipart/form-data`): a browser upload.
pub fn form_upload(input: &RouteInput<'_>) -> bool {
    input
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("multipart/form-data")
        })
}
