//! Uploads from the browser's script: one PUT for a small file, a multipart
//! upload for a big one (the script sends its parts one after the other and
//! shows the progress). Bodies are passed on to the gateway as they arrive.

use crate::error::ConsoleError;
use crate::gateway::{Payload, S3Request};
use crate::named::Named;
use crate::session::SignedIn;
use crate::xml;
use crate::Console;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::Json;
use http::{header, HeaderMap, Method};
use quick_xml::escape::escape;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// The object an upload writes, and the multipart upload it belongs to.
#[derive(Deserialize)]
pub(crate) struct UploadQuery {
    key: String,
    #[serde(default)]
    upload_id: String,
    #[serde(default)]
    part: u32,
    #[serde(default, rename = "type")]
    content_type: String,
}

impl UploadQuery {
    fn key(&self) -> Result<&str, ConsoleError> {
        if self.key.is_empty() {
            return Err(ConsoleError::BadInput(
                "an upload needs an object key".into(),
            ));
        }
        Ok(&self.key)
    }
}

/// The body of a browser's request as a payload for the gateway: S3 needs
/// its length up front, which browsers always send for a file.
fn streamed(headers: &HeaderMap, body: Body) -> Result<Payload, ConsoleError> {
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .ok_or_else(|| ConsoleError::BadInput("an upload needs a Content-Length".into()))?;
    Ok(Payload::Stream { body, length })
}

fn etag_of(headers: &HeaderMap) -> Value {
    json!({ "etag": headers.get(header::ETAG).and_then(|v| v.to_str().ok()).unwrap_or("") })
}

/// POST /buckets/{bucket}/upload?key=: PutObject, or with `upload_id` and
/// `part`, UploadPart.
pub(crate) async fn put(
    State(console): State<Arc<Console>>,
    SignedIn(session): SignedIn,
    Named(bucket): Named,
    Query(query): Query<UploadQuery>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ConsoleError> {
    let mut request = S3Request::object(Method::PUT, &bucket, query.key()?);
    if query.upload_id.is_empty() {
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        if let Some(content_type) = content_type {
            request = request.header(header::CONTENT_TYPE, content_type);
        }
    } else {
        request = request
            .query("partNumber", query.part.to_string())
            .query("uploadId", query.upload_id.as_str());
    }
    let request = request.payload(streamed(&headers, body)?);
    let answer = console.gateway.call(session.keys()?, request).await?;
    Ok(Json(etag_of(&answer.headers)))
}

/// POST /buckets/{bucket}/multipart/start?key=&type=: CreateMultipartUpload.
pub(crate) async fn start(
    State(console): State<Arc<Console>>,
    SignedIn(session): SignedIn,
    Named(bucket): Named,
    Query(query): Query<UploadQuery>,
) -> Result<Json<Value>, ConsoleError> {
    let mut request = S3Request::object(Method::POST, &bucket, query.key()?).query("uploads", "");
    if !query.content_type.is_empty() {
        request = request.header(header::CONTENT_TYPE, query.content_type.as_str());
    }
    let answer = console.gateway.call(session.keys()?, request).await?;
    let upload = xml::first(&answer.body, "InitiateMultipartUploadResult")
        .map_err(ConsoleError::Gateway)?
        .remove("UploadId")
        .ok_or_else(|| ConsoleError::Gateway("no UploadId in the answer".into()))?;
    Ok(Json(json!({ "upload_id": upload })))
}

/// The parts the script sent, in order.
#[derive(Deserialize)]
pub(crate) struct Parts {
    parts: Vec<Part>,
}

/// One part the script sent.
#[derive(Deserialize)]
pub(crate) struct Part {
    part: u32,
    etag: String,
}

/// The CompleteMultipartUpload document of these parts.
fn complete_document(parts: &[Part]) -> String {
    let mut body = String::from("<CompleteMultipartUpload>");
    for part in parts {
        body.push_str(&format!(
            "<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>",
            part.part,
            escape(&part.etag)
        ));
    }
    body.push_str("</CompleteMultipartUpload>");
    body
}

/// POST /buckets/{bucket}/multipart/complete?key=&upload_id=: CompleteMultipartUpload.
pub(crate) async fn complete(
    State(console): State<Arc<Console>>,
    SignedIn(session): SignedIn,
    Named(bucket): Named,
    Query(query): Query<UploadQuery>,
    Json(parts): Json<Parts>,
) -> Result<Json<Value>, ConsoleError> {
    let request = S3Request::object(Method::POST, &bucket, query.key()?)
        .query("uploadId", query.upload_id.as_str())
        .payload(Payload::Bytes(complete_document(&parts.parts).into()));
    let answer = console.gateway.call(session.keys()?, request).await?;
    // S3 may answer 200 and then an error, once the parts are joined.
    let error = xml::first(&answer.body, "Error").map_err(ConsoleError::Gateway)?;
    if let Some(code) = error.get("Code") {
        return Err(ConsoleError::S3 {
            status: http::StatusCode::INTERNAL_SERVER_ERROR,
            code: code.clone(),
            message: error.get("Message").cloned().unwrap_or_default(),
        });
    }
    let result =
        xml::first(&answer.body, "CompleteMultipartUploadResult").map_err(ConsoleError::Gateway)?;
    Ok(Json(
        json!({ "etag": result.get("ETag").cloned().unwrap_or_default() }),
    ))
}

/// POST /buckets/{bucket}/multipart/abort?key=&upload_id=: AbortMultipartUpload.
pub(crate) async fn abort(
    State(console): State<Arc<Console>>,
    SignedIn(session): SignedIn,
    Named(bucket): Named,
    Query(query): Query<UploadQuery>,
) -> Result<Json<Value>, ConsoleError> {
    let request = S3Request::object(Method::DELETE, &bucket, query.key()?)
        .query("uploadId", query.upload_id.as_str());
    console.gateway.call(session.keys()?, request).await?;
    Ok(Json(json!({})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_complete_document_lists_every_part_escaped() {
        let parts = [
            Part {
                part: 1,
                etag: "\"a\"".into(),
            },
            Part {
                part: 2,
                etag: "<b>".into(),
            },
        ];
        assert_eq!(
            complete_document(&parts),
            "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>&quot;a&quot;</ETag></Part>\
<Part><PartNumber>2</PartNumber><ETag>&lt;b&gt;</ETag></Part></CompleteMultipartUpload>"
        );
    }

    #[test]
    fn uploads_need_their_length() {
        let mut headers = HeaderMap::new();
        assert!(streamed(&headers, Body::empty()).is_err());
        headers.insert(header::CONTENT_LENGTH, "12".parse().unwrap());
        match streamed(&headers, Body::empty()).unwrap() {
            Payload::Stream { length, .. } => assert_eq!(length, 12),
            _ => panic!("a stream"),
        }
    }
}
