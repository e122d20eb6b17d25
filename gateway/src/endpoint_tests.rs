//! Table tests of the router: (method, URI, headers) -> endpoint, including
//! the requests of the AWS API reference examples and unknown operations.

use super::*;
use crate::error::S3Code;
use crate::router::{target, Access};
use access::Action;
use http::HeaderValue;
use meta_api::naming::VersionRef;

fn route_with(
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    domain: Option<&str>,
) -> Result<Endpoint, S3Error> {
    let method: Method = method.parse().unwrap();
    let uri: Uri = uri.parse().unwrap();
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.insert(
            http::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    parse(&method, &uri, &map, domain)
}

fn route(method: &str, uri: &str) -> Result<Endpoint, S3Error> {
    route_with(method, uri, &[], None)
}

fn name(method: &str, uri: &str) -> &'static str {
    route(method, uri)
        .unwrap_or_else(|e| panic!("{method} {uri}: {e}"))
        .name()
}

#[test]
fn routes_every_served_operation() {
    let table = [
        ("GET", "/", "ListBuckets"),
        ("PUT", "/b", "CreateBucket"),
        ("PUT", "/b/", "CreateBucket"),
        ("HEAD", "/b", "HeadBucket"),
        ("DELETE", "/b", "DeleteBucket"),
        ("GET", "/b?location", "GetBucketLocation"),
        ("GET", "/b", "ListObjects"),
        ("GET", "/b?prefix=a&marker=m&max-keys=3", "ListObjects"),
        ("GET", "/b?list-type=2", "ListObjectsV2"),
        (
            "GET",
            "/b?list-type=2&prefix=E&start-after=ExampleGuide.pdf&max-keys=3",
            "ListObjectsV2",
        ),
        ("GET", "/b?uploads", "ListMultipartUploads"),
        ("POST", "/b?delete", "DeleteObjects"),
        ("PUT", "/b/k", "PutObject"),
        ("GET", "/b/k", "GetObject"),
        ("GET", "/b/k?x-id=GetObject", "GetObject"),
        ("GET", "/b/k?versionId=null", "GetObject"),
        ("HEAD", "/b/k", "HeadObject"),
        ("DELETE", "/b/k", "DeleteObject"),
        ("POST", "/b/k?uploads", "CreateMultipartUpload"),
        ("PUT", "/b/k?partNumber=1&uploadId=u", "UploadPart"),
        ("POST", "/b/k?uploadId=u", "CompleteMultipartUpload"),
        ("DELETE", "/b/k?uploadId=u", "AbortMultipartUpload"),
        ("GET", "/b/k?uploadId=u", "ListParts"),
        (
            "GET",
            "/b/k?uploadId=u&max-parts=2&part-number-marker=1",
            "ListParts",
        ),
    ];
    for (method, uri, expected) in table {
        assert_eq!(name(method, uri), expected, "{method} {uri}");
    }
}

#[test]
fn keys_are_decoded_plain_names() {
    let cases = [
        ("/b/a%20b", "a b"),
        ("/b/../x", "../x"),
        ("/b/a//b", "a//b"),
        ("/b/.", "."),
        ("/b/%2E%2E%2Fetc%2Fpasswd", "../etc/passwd"),
        ("/b/caf%C3%A9/%E6%97%A5%E6%9C%AC", "café/日本"),
        ("/b/a+b", "a+b"),
        ("/b//lead", "/lead"),
        ("/b/dir/", "dir/"),
    ];
    for (uri, key) in cases {
        // http::Uri keeps `..` segments as sent.
        match route("GET", uri).unwrap() {
            Endpoint::GetObject { bucket, key: k, .. } => {
                assert_eq!(bucket, "b");
                assert_eq!(&*k, key, "{uri}");
            }
            other => panic!("{uri}: {other:?}"),
        }
    }
    assert_eq!(
        route("GET", "/b/%FF").unwrap_err().code(),
        S3Code::InvalidURI
    );
}

#[test]
fn virtual_hosted_style_needs_the_configured_domain() {
    let domain = Some("s3.example.com");
    let hosted = |method, uri, host| route_with(method, uri, &[("host", host)], domain).unwrap();
    assert_eq!(
        hosted("GET", "/photos/a.jpg", "pics.s3.example.com:9878"),
        Endpoint::GetObject {
            version: Default::default(),
            bucket: "pics".into(),
            key: "photos/a.jpg".into(),
            params: ReadParams::default()
        }
    );
    assert_eq!(
        hosted("PUT", "/", "Pics.S3.Example.com"),
        Endpoint::CreateBucket {
            bucket: "pics".into()
        }
    );
    assert_eq!(
        hosted("GET", "/b/k", "s3.example.com"),
        Endpoint::GetObject {
            version: Default::default(),
            bucket: "b".into(),
            key: "k".into(),
            params: ReadParams::default()
        }
    );
    assert_eq!(
        hosted("GET", "/", "s3.example.com"),
        Endpoint::ListBuckets {
            params: Default::default()
        }
    );
    // Without a domain, the Host never names a bucket.
    let path = route_with("GET", "/b/k", &[("host", "pics.s3.example.com")], None).unwrap();
    assert_eq!(path.name(), "GetObject");
    // A host outside the domain is path style.
    assert_eq!(hosted("GET", "/b", "other.host").name(), "ListObjects");
}

#[test]
fn unknown_operations_are_not_implemented() {
    let table = [
        ("GET", "/b?replication", "GetBucketReplication"),
        ("PUT", "/b?website", "PutBucketWebsite"),
        ("POST", "/b/k?restore", "PostObjectRestore"),
        ("PATCH", "/b/k", "PATCH"),
        ("PUT", "/", "PUT on the service"),
        ("POST", "/b/k", "POST on an object"),
    ];
    for (method, uri, op) in table {
        let err = route(method, uri).expect_err(uri);
        assert_eq!(err.code(), S3Code::NotImplemented, "{method} {uri}");
        assert_eq!(err.code().status().as_u16(), 501);
        assert!(
            err.message().contains(op),
            "{method} {uri}: {}",
            err.message()
        );
    }
}

#[test]
fn routes_object_extensions() {
    let table = [
        ("GET", "/b?tagging", "GetBucketTagging"),
        ("PUT", "/b?tagging", "PutBucketTagging"),
        ("DELETE", "/b?tagging", "DeleteBucketTagging"),
        ("GET", "/b?versioning", "GetBucketVersioning"),
        ("PUT", "/b?versioning", "PutBucketVersioning"),
        ("GET", "/b?versions", "ListObjectVersions"),
        (
            "GET",
            "/b?versions&prefix=p&key-marker=k&version-id-marker=null&max-keys=2",
            "ListObjectVersions",
        ),
        ("GET", "/b?acl", "GetBucketAcl"),
        ("PUT", "/b?acl", "PutBucketAcl"),
        ("GET", "/b/k?tagging", "GetObjectTagging"),
        ("PUT", "/b/k?tagging", "PutObjectTagging"),
        ("DELETE", "/b/k?tagging", "DeleteObjectTagging"),
        ("GET", "/b/k?acl", "GetObjectAcl"),
        ("PUT", "/b/k?acl", "PutObjectAcl"),
        ("GET", "/b/k?attributes", "GetObjectAttributes"),
        ("DELETE", "/b/k?versionId=null", "DeleteObject"),
        ("HEAD", "/b/k?versionId=null", "HeadObject"),
    ];
    for (method, uri, op) in table {
        assert_eq!(name(method, uri), op, "{method} {uri}");
    }
    let copy = route_with("PUT", "/b/k", &[("x-amz-copy-source", "/a/b")], None).unwrap();
    assert_eq!(
        copy,
        Endpoint::CopyObject {
            bucket: "b".into(),
            key: "k".into()
        }
    );
    let part_copy = route_with(
        "PUT",
        "/b/k?partNumber=3&uploadId=u",
        &[("x-amz-copy-source", "/a/b")],
        None,
    )
    .unwrap();
    assert_eq!(
        part_copy,
        Endpoint::UploadPartCopy {
            bucket: "b".into(),
            key: "k".into(),
            upload_id: "u".into(),
            part_number: PartNumber(3)
        }
    );
    let bad_part = route_with(
        "PUT",
        "/b/k?partNumber=10001&uploadId=u",
        &[("x-amz-copy-source", "/a/b")],
        None,
    )
    .unwrap_err();
    assert_eq!(bad_part.code(), S3Code::InvalidArgument);
    // A version id must have S3's form; which versions exist is meta's to say.
    let version = route("GET", "/b/k?versionId=3").unwrap_err();
    assert_eq!(version.code(), S3Code::InvalidArgument);
    let empty = route("DELETE", "/b/k?versionId=").unwrap_err();
    assert_eq!(empty.message(), "Version id cannot be the empty string");
    let foreign = "v5n1PPUjOCMHLyyfq0ayjoZ5RZLfVQKA";
    assert_eq!(
        route("HEAD", &format!("/b/k?versionId={foreign}")).unwrap(),
        Endpoint::HeadObject {
            bucket: "b".into(),
            key: "k".into(),
            version: VersionParam(Some(VersionRef::Id {
                id: foreign.into(),
                seq: 0
            })),
            params: ReadParams::default()
        }
    );
    assert_eq!(
        route("GET", "/b/k?tagging&versionId=null").unwrap(),
        Endpoint::GetObjectTagging {
            bucket: "b".into(),
            key: "k".into(),
            version: VersionParam(Some(VersionRef::Null)),
        }
    );
    let marker = route("GET", "/b?versions&version-id-marker=null").unwrap_err();
    assert_eq!(marker.code(), S3Code::InvalidArgument);
}

#[test]
fn invalid_parameters_are_refused_at_the_boundary() {
    let table = [
        (
            "PUT",
            "/b/k?partNumber=0&uploadId=u",
            S3Code::InvalidArgument,
        ),
        (
            "PUT",
            "/b/k?partNumber=10001&uploadId=u",
            S3Code::InvalidArgument,
        ),
        (
            "PUT",
            "/b/k?partNumber=x&uploadId=u",
            S3Code::InvalidArgument,
        ),
        ("PUT", "/b/k?partNumber=1", S3Code::InvalidArgument),
        ("PUT", "/b/k?uploadId=u", S3Code::InvalidArgument),
        ("GET", "/b?list-type=2&max-keys=-1", S3Code::InvalidArgument),
        ("GET", "/b?list-type=3", S3Code::InvalidArgument),
        ("GET", "/b?encoding-type=base64", S3Code::InvalidArgument),
        ("GET", "/b/k?partNumber=0", S3Code::InvalidArgument),
    ];
    for (method, uri, code) in table {
        assert_eq!(
            route(method, uri).expect_err(uri).code(),
            code,
            "{method} {uri}"
        );
    }
}

#[test]
fn key_length_limit_is_1024_bytes() {
    let ok = format!("/b/{}", "k".repeat(1024));
    assert_eq!(name("PUT", &ok), "PutObject");
    let long = format!("/b/{}", "k".repeat(1025));
    assert_eq!(
        route("PUT", &long).unwrap_err().code(),
        S3Code::KeyTooLongError
    );
    let long_utf8 = format!("/b/{}", "%C3%A9".repeat(513));
    assert_eq!(
        route("PUT", &long_utf8).unwrap_err().code(),
        S3Code::KeyTooLongError
    );
    let post = format!("/b/{}?uploads", "k".repeat(1025));
    assert_eq!(
        route("POST", &post).unwrap_err().code(),
        S3Code::KeyTooLongError
    );
}

#[test]
fn access_follows_the_bucket() {
    assert_eq!(
        Endpoint::ListBuckets {
            params: Default::default()
        }
        .access(),
        Access::AnyUser {
            action: Action::ListAllMyBuckets
        }
    );
    assert_eq!(route("PUT", "/b").unwrap().access(), Access::CreateBucket);
    assert_eq!(
        route("GET", "/b/k").unwrap().access(),
        Access::Bucket {
            name: "b",
            action: Action::GetObject
        }
    );
    assert_eq!(
        route("GET", "/b?uploads").unwrap().access(),
        Access::Bucket {
            name: "b",
            action: Action::ListBucketMultipartUploads
        }
    );
}

#[test]
fn resource_is_the_decoded_path() {
    let t = target(&"/b/a%20b".parse().unwrap(), &HeaderMap::new(), None).unwrap();
    assert_eq!(t.resource(), "/b/a b");
    let t = target(&"/".parse().unwrap(), &HeaderMap::new(), None).unwrap();
    assert_eq!(t.resource(), "/");
}

#[test]
fn cors_preflight_and_form_upload_routes() {
    let form = [("content-type", "multipart/form-data; boundary=xyz")];
    let table = [
        ("GET", "/b?cors", &[][..], "GetBucketCors"),
        ("PUT", "/b?cors", &[][..], "PutBucketCors"),
        ("DELETE", "/b?cors", &[][..], "DeleteBucketCors"),
        ("OPTIONS", "/b", &[][..], "PreflightRequest"),
        ("OPTIONS", "/b/photos/x.jpg", &[][..], "PreflightRequest"),
        ("POST", "/b", &form[..], "PostObject"),
    ];
    for (method, uri, headers, op) in table {
        let endpoint = route_with(method, uri, headers, None).unwrap();
        assert_eq!(endpoint.name(), op, "{method} {uri}");
    }
    // Preflights and form uploads carry no SigV4 header: the handler decides.
    assert_eq!(
        route("OPTIONS", "/b/k").unwrap().access(),
        Access::Unsigned {
            name: "b",
            action: Action::GetBucketCors
        }
    );
    // A bucket POST that is not a form is refused as S3 does.
    let err = route("POST", "/b").unwrap_err();
    assert_eq!(err.code(), S3Code::PreconditionFailed);
}

/// Each endpoint is the IAM action S3 names it by; reads are read-only and
/// every bucket endpoint may be tried unsigned (the bucket's settings decide).
#[test]
fn endpoints_are_their_iam_actions() {
    for (method, uri, action) in [
        ("GET", "/b/k", Action::GetObject),
        ("HEAD", "/b/k", Action::GetObject),
        ("GET", "/b", Action::ListBucket),
        ("HEAD", "/b", Action::ListBucket),
        ("GET", "/b?versions", Action::ListBucketVersions),
        ("PUT", "/b/k", Action::PutObject),
        ("POST", "/b/k?uploads", Action::PutObject),
        ("DELETE", "/b/k?uploadId=u", Action::AbortMultipartUpload),
        ("GET", "/b/k?uploadId=u", Action::ListMultipartUploadParts),
        ("POST", "/b?delete", Action::DeleteObject),
        ("DELETE", "/b?tagging", Action::PutBucketTagging),
        (
            "GET",
            "/b?ownershipControls",
            Action::GetBucketOwnershipControls,
        ),
        (
            "DELETE",
            "/b?ownershipControls",
            Action::PutBucketOwnershipControls,
        ),
        (
            "GET",
            "/b?publicAccessBlock",
            Action::GetBucketPublicAccessBlock,
        ),
        (
            "PUT",
            "/b?publicAccessBlock",
            Action::PutBucketPublicAccessBlock,
        ),
        ("GET", "/b/k?acl", Action::GetObjectAcl),
        ("PUT", "/b?acl", Action::PutBucketAcl),
        ("GET", "/b?policy", Action::GetBucketPolicy),
        ("PUT", "/b?policy", Action::PutBucketPolicy),
        ("DELETE", "/b?policy", Action::DeleteBucketPolicy),
        ("GET", "/b?policyStatus", Action::GetBucketPolicyStatus),
    ] {
        let endpoint = route(method, uri).unwrap();
        assert_eq!(
            endpoint.access(),
            Access::Bucket { name: "b", action },
            "{method} {uri}"
        );
    }
}

#[test]
fn read_only_and_public_read_endpoints() {
    for (method, uri) in [
        ("GET", "/b/k"),
        ("HEAD", "/b/k"),
        ("GET", "/b"),
        ("GET", "/b?list-type=2"),
    ] {
        let endpoint = route(method, uri).unwrap();
        assert!(endpoint.access().is_read_only(), "{method} {uri}");
        assert!(endpoint.access().allows_anonymous(), "{method} {uri}");
    }
    for (method, uri) in [
        ("PUT", "/b/k"),
        ("DELETE", "/b/k"),
        ("PUT", "/b?cors"),
        ("POST", "/b?delete"),
    ] {
        let endpoint = route(method, uri).unwrap();
        assert!(!endpoint.access().is_read_only(), "{method} {uri}");
        assert!(endpoint.access().allows_anonymous(), "{method} {uri}");
    }
    let uploads = route("GET", "/b?uploads").unwrap();
    assert!(uploads.access().is_read_only());
    assert!(!route("PUT", "/b").unwrap().access().allows_anonymous());
}
