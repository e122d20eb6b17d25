//! In-process cluster: MetaService, five datanodes and the S3 router on
//! 127.0.0.1:0, driven over real HTTP with requests signed by aws-sigv4.

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity as SdkIdentity;
use base64::Engine;
use blockstore::client::{ClientConfig, StoreClient};
use blockstore::meta::{AdminOp, MetaClient, MetaConfig, MetaResponse, MetaService};
use bytes::Bytes;
use datanode::{DatanodeConfig, RunningDatanode};
use gateway::GatewayConfig;
use http::{HeaderMap, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use md5::{Digest, Md5};
use rand::RngCore;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};
use tempfile::TempDir;

const ROOT_KEY: &str = "ROOTACCESSKEY";
const ROOT_SECRET: &str = "root-secret-key";
const ADMIN_TOKEN: &str = "admin-token";
const BLOCK_SIZE: u64 = 4 * 1024 * 1024;

struct Cluster {
    addr: SocketAddr,
    meta: MetaClient,
    datanodes: Vec<RunningDatanode>,
    _dir: TempDir,
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Reply {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap())
            .unwrap_or_else(|| panic!("no {name} header in {:?}", self.headers))
    }
}

type Creds<'a> = Option<(&'a str, &'a str)>;
const ROOT: Creds<'static> = Some((ROOT_KEY, ROOT_SECRET));

impl Cluster {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let service = MetaService::open(MetaConfig {
            data_dir: dir.path().join("meta"),
            stale_after: Duration::from_secs(30),
            dead_after: Duration::from_secs(60),
            admin_token: Some(ADMIN_TOKEN.into()),
            root_access_key: Some(ROOT_KEY.into()),
            root_secret_key: Some(ROOT_SECRET.into()),
            block_size: BLOCK_SIZE,
            ..MetaConfig::new(dir.path().join("meta"))
        })
        .unwrap();
        let meta = MetaClient::Local(service);
        let mut datanodes = Vec::new();
        for i in 0..5 {
            let config = DatanodeConfig {
                data_dir: dir.path().join(format!("dn{i}")),
                fsync: false,
                heartbeat_interval: Duration::from_millis(500),
                capacity: Some(64 * 1024 * 1024 * 1024),
                ..DatanodeConfig::default()
            };
            datanodes.push(datanode::start(config, meta.clone()).await.unwrap());
        }
        wait_for_datanodes(&meta, 5).await;
        let store = StoreClient::new(
            meta.clone(),
            ClientConfig {
                block_size: BLOCK_SIZE,
                ..ClientConfig::default()
            },
        );
        let app = gateway::router(
            meta.clone(),
            store,
            GatewayConfig {
                region: "us-east-1".into(),
                domain: None,
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            addr,
            meta,
            datanodes,
            _dir: dir,
        }
    }

    async fn stop(self) {
        for datanode in self.datanodes {
            datanode.shutdown().await;
        }
    }

    /// A new user with its own access key.
    async fn user(&self, name: &str) -> (String, String) {
        let create = AdminOp::CreateUser { name: name.into() };
        self.meta.admin(ADMIN_TOKEN, create).await.unwrap();
        let key = AdminOp::CreateKey { user: name.into() };
        match self.meta.admin(ADMIN_TOKEN, key).await.unwrap() {
            MetaResponse::Key(k) => (k.access_key, k.secret_key),
            other => panic!("unexpected {other:?}"),
        }
    }

    async fn send(
        &self,
        creds: Creds<'_>,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Reply {
        self.send_as(creds, method, path, headers, body, false)
            .await
    }

    /// `send`, with the body signed as STREAMING-UNSIGNED-PAYLOAD-TRAILER when
    /// `unsigned_trailer` (the body is then already aws-chunked framed).
    async fn send_as(
        &self,
        creds: Creds<'_>,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        unsigned_trailer: bool,
    ) -> Reply {
        let uri = format!("http://{}{path}", self.addr);
        let mut builder = http::Request::builder().method(method).uri(&uri);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let mut request = builder.body(()).unwrap();
        if let Some((access_key, secret)) = creds {
            sign_request(
                &mut request,
                access_key,
                secret,
                headers,
                body,
                unsigned_trailer,
            );
        }
        let (mut parts, ()) = request.into_parts();
        parts.uri = parts
            .uri
            .path_and_query()
            .unwrap()
            .as_str()
            .parse()
            .unwrap();
        parts
            .headers
            .insert(http::header::HOST, self.addr.to_string().parse().unwrap());
        if matches!(method, "PUT" | "POST") {
            // hyper leaves Content-Length out of empty bodies; S3 clients send it.
            parts
                .headers
                .insert(http::header::CONTENT_LENGTH, body.len().into());
        }
        let request = http::Request::from_parts(parts, Full::new(Bytes::copy_from_slice(body)));
        let stream = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(connection);
        let response = sender.send_request(request).await.unwrap();
        let (parts, body) = response.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        Reply {
            status: parts.status,
            headers: parts.headers,
            body,
        }
    }
}

async fn wait_for_datanodes(meta: &MetaClient, count: usize) {
    for _ in 0..100 {
        if let Ok(MetaResponse::Status(status)) = meta.admin(ADMIN_TOKEN, AdminOp::Status).await {
            if status.datanodes.len() >= count {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("datanodes did not register");
}

fn sign_request(
    request: &mut http::Request<()>,
    access_key: &str,
    secret: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    unsigned_trailer: bool,
) {
    let identity: SdkIdentity = Credentials::new(access_key, secret, None, None, "test").into();
    let mut settings = SigningSettings::default();
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name("s3")
        .time(SystemTime::now())
        .settings(settings)
        .build()
        .unwrap()
        .into();
    let uri = request.uri().to_string();
    let signable = SignableRequest::new(
        request.method().as_str(),
        uri,
        headers.iter().copied(),
        if unsigned_trailer {
            SignableBody::StreamingUnsignedPayloadTrailer
        } else {
            SignableBody::Bytes(body)
        },
    )
    .unwrap();
    let (instructions, _) = sign(signable, &params).unwrap().into_parts();
    instructions.apply_to_request_http1x(request);
}

fn random_bytes(len: usize) -> Vec<u8> {
    let mut data = vec![0u8; len];
    rand::thread_rng().fill_bytes(&mut data);
    data
}

fn md5_b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(Md5::digest(data))
}

fn md5_hex(data: &[u8]) -> String {
    hex::encode(Md5::digest(data))
}

fn assert_error(reply: &Reply, status: u16, code: &str) {
    assert_eq!(reply.status.as_u16(), status, "{}", reply.text());
    assert_eq!(reply.header("content-type"), "application/xml");
    assert!(
        reply.text().contains(&format!("<Code>{code}</Code>")),
        "{}",
        reply.text()
    );
    let id = reply.header("x-amz-request-id");
    assert!(reply
        .text()
        .contains(&format!("<RequestId>{id}</RequestId>")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_get_range_list_delete_round_trip() {
    let cluster = Cluster::start().await;
    let created = cluster.send(ROOT, "PUT", "/photos", &[], b"").await;
    assert_eq!(created.status, StatusCode::OK, "{}", created.text());
    assert!(!created.header("x-amz-request-id").is_empty());
    assert!(!created.header("x-amz-id-2").is_empty());
    let again = cluster.send(ROOT, "PUT", "/photos", &[], b"").await;
    assert_error(&again, 409, "BucketAlreadyOwnedByYou");
    let bad_name = cluster.send(ROOT, "PUT", "/Bad_Name", &[], b"").await;
    assert_error(&bad_name, 400, "InvalidBucketName");

    // More than one stripe and more than one block group.
    let data = random_bytes(9 * 1024 * 1024 + 12345);
    let md5 = md5_b64(&data);
    let put = cluster
        .send(
            ROOT,
            "PUT",
            "/photos/dir/a%20b.bin",
            &[
                ("content-md5", &md5),
                ("content-type", "image/png"),
                ("x-amz-meta-Color", "blue"),
            ],
            &data,
        )
        .await;
    assert_eq!(put.status, StatusCode::OK, "{}", put.text());
    assert_eq!(put.header("etag"), format!("\"{}\"", md5_hex(&data)));

    let get = cluster
        .send(ROOT, "GET", "/photos/dir/a%20b.bin", &[], b"")
        .await;
    assert_eq!(get.status, StatusCode::OK);
    assert_eq!(get.body.len(), data.len());
    assert!(get.body == data[..], "GET body differs");
    assert_eq!(get.header("content-type"), "image/png");
    assert_eq!(get.header("x-amz-meta-color"), "blue");
    assert_eq!(get.header("accept-ranges"), "bytes");
    assert!(get.header("last-modified").ends_with("GMT"));

    let head = cluster
        .send(ROOT, "HEAD", "/photos/dir/a%20b.bin", &[], b"")
        .await;
    assert_eq!(head.status, StatusCode::OK);
    assert_eq!(head.header("content-length"), data.len().to_string());
    assert!(head.body.is_empty());

    let start = 3 * 1024 * 1024 - 7;
    let range = format!("bytes={start}-{}", start + 99);
    let part = cluster
        .send(
            ROOT,
            "GET",
            "/photos/dir/a%20b.bin",
            &[("range", &range)],
            b"",
        )
        .await;
    assert_eq!(part.status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(part.body, data[start..start + 100]);
    assert_eq!(
        part.header("content-range"),
        format!("bytes {start}-{}/{}", start + 99, data.len())
    );
    let inverted = cluster
        .send(
            ROOT,
            "GET",
            "/photos/dir/a%20b.bin",
            &[("range", "bytes=5-2")],
            b"",
        )
        .await;
    assert_eq!(inverted.status, StatusCode::OK);
    assert_eq!(inverted.body.len(), data.len());
    let past_end = format!("bytes={}-", data.len());
    let unsatisfiable = cluster
        .send(
            ROOT,
            "GET",
            "/photos/dir/a%20b.bin",
            &[("range", &past_end)],
            b"",
        )
        .await;
    assert_error(&unsatisfiable, 416, "InvalidRange");
    assert_eq!(
        unsatisfiable.header("content-range"),
        format!("bytes */{}", data.len())
    );

    let list = cluster
        .send(ROOT, "GET", "/photos?list-type=2&delimiter=%2F", &[], b"")
        .await;
    assert_eq!(list.status, StatusCode::OK);
    assert!(
        list.text()
            .contains("<CommonPrefixes><Prefix>dir/</Prefix></CommonPrefixes>"),
        "{}",
        list.text()
    );
    let list = cluster
        .send(ROOT, "GET", "/photos?list-type=2", &[], b"")
        .await;
    assert!(
        list.text().contains("<Key>dir/a b.bin</Key>"),
        "{}",
        list.text()
    );

    let not_empty = cluster.send(ROOT, "DELETE", "/photos", &[], b"").await;
    assert_error(&not_empty, 409, "BucketNotEmpty");
    let deleted = cluster
        .send(ROOT, "DELETE", "/photos/dir/a%20b.bin", &[], b"")
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let deleted_again = cluster
        .send(ROOT, "DELETE", "/photos/dir/a%20b.bin", &[], b"")
        .await;
    assert_eq!(deleted_again.status, StatusCode::NO_CONTENT);
    let missing = cluster
        .send(ROOT, "GET", "/photos/dir/a%20b.bin", &[], b"")
        .await;
    assert_error(&missing, 404, "NoSuchKey");
    assert!(missing
        .text()
        .contains("<Resource>/photos/dir/a b.bin</Resource>"));
    let head_missing = cluster
        .send(ROOT, "HEAD", "/photos/nothing", &[], b"")
        .await;
    assert_eq!(head_missing.status, StatusCode::NOT_FOUND);
    assert!(head_missing.body.is_empty());
    let gone = cluster.send(ROOT, "DELETE", "/photos", &[], b"").await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_checks_commit_nothing_and_users_stay_apart() {
    let cluster = Cluster::start().await;
    assert_eq!(
        cluster.send(ROOT, "PUT", "/alpha", &[], b"").await.status,
        StatusCode::OK
    );
    let data = b"hello world";
    let wrong_md5 = md5_b64(b"something else");
    let bad = cluster
        .send(
            ROOT,
            "PUT",
            "/alpha/k",
            &[("content-md5", &wrong_md5)],
            data,
        )
        .await;
    assert_error(&bad, 400, "BadDigest");
    assert_error(
        &cluster.send(ROOT, "GET", "/alpha/k", &[], b"").await,
        404,
        "NoSuchKey",
    );
    let invalid = cluster
        .send(ROOT, "PUT", "/alpha/k", &[("content-md5", "nope")], data)
        .await;
    assert_error(&invalid, 400, "InvalidDigest");
    let unknown = cluster
        .send(
            ROOT,
            "PUT",
            "/alpha/k",
            &[("x-tessera-replication", "rs-9-9")],
            data,
        )
        .await;
    assert_error(&unknown, 400, "InvalidArgument");
    let replicated = cluster
        .send(
            ROOT,
            "PUT",
            "/alpha/r",
            &[("x-tessera-replication", "replicated-3")],
            data,
        )
        .await;
    assert_eq!(replicated.status, StatusCode::OK, "{}", replicated.text());
    let head = cluster.send(ROOT, "HEAD", "/alpha/r", &[], b"").await;
    assert_eq!(head.header("x-tessera-replication"), "replicated-3");

    let anonymous = cluster.send(None, "GET", "/alpha/r", &[], b"").await;
    assert_error(&anonymous, 403, "AccessDenied");
    let acl = cluster.send(ROOT, "GET", "/alpha?acl", &[], b"").await;
    assert_error(&acl, 501, "NotImplemented");
    assert!(acl.text().contains("GetBucketAcl"));
    let no_bucket = cluster.send(ROOT, "PUT", "/nothing/k", &[], data).await;
    assert_error(&no_bucket, 404, "NoSuchBucket");

    let (bob_key, bob_secret) = cluster.user("bob").await;
    let bob = Some((bob_key.as_str(), bob_secret.as_str()));
    let denied = cluster.send(bob, "GET", "/alpha/r", &[], b"").await;
    assert_error(&denied, 403, "AccessDenied");
    let denied_put = cluster.send(bob, "PUT", "/alpha/x", &[], data).await;
    assert_error(&denied_put, 403, "AccessDenied");
    assert_eq!(
        cluster.send(bob, "PUT", "/bobs", &[], b"").await.status,
        StatusCode::OK
    );
    let taken = cluster.send(bob, "PUT", "/alpha", &[], b"").await;
    assert_error(&taken, 409, "BucketAlreadyExists");
    let bob_list = cluster.send(bob, "GET", "/", &[], b"").await.text();
    assert!(bob_list.contains("<Name>bobs</Name>") && !bob_list.contains("<Name>alpha</Name>"));
    let root_list = cluster.send(ROOT, "GET", "/", &[], b"").await.text();
    assert!(root_list.contains("<Name>bobs</Name>") && root_list.contains("<Name>alpha</Name>"));
    let root_reads_bob = cluster
        .send(ROOT, "GET", "/bobs?list-type=2", &[], b"")
        .await;
    assert_eq!(root_reads_bob.status, StatusCode::OK);

    // An empty object, then paging through a listing with continuation tokens.
    let empty = cluster.send(ROOT, "PUT", "/alpha/empty", &[], b"").await;
    assert_eq!(empty.status, StatusCode::OK, "{}", empty.text());
    assert_eq!(empty.header("etag"), "\"d41d8cd98f00b204e9800998ecf8427e\"");
    let got = cluster.send(ROOT, "GET", "/alpha/empty", &[], b"").await;
    assert_eq!((got.status, got.body.len()), (StatusCode::OK, 0));
    let ranged = cluster
        .send(ROOT, "GET", "/alpha/empty", &[("range", "bytes=0-")], b"")
        .await;
    assert_error(&ranged, 416, "InvalidRange");
    let mut keys = Vec::new();
    let mut path = "/alpha?list-type=2&max-keys=1".to_string();
    for _ in 0..10 {
        let page = cluster.send(ROOT, "GET", &path, &[], b"").await.text();
        assert!(page.contains("<KeyCount>1</KeyCount>"), "{page}");
        keys.push(tag(&page, "Key"));
        if page.contains("<IsTruncated>false</IsTruncated>") {
            break;
        }
        let token = tag(&page, "NextContinuationToken");
        path = format!("/alpha?list-type=2&max-keys=1&continuation-token={token}");
    }
    assert_eq!(keys, ["empty", "r"]);

    let delete =
        b"<Delete><Object><Key>empty</Key></Object><Object><Key>absent</Key></Object></Delete>";
    let md5 = md5_b64(delete);
    let reply = cluster
        .send(
            ROOT,
            "POST",
            "/alpha?delete",
            &[("content-md5", &md5)],
            delete,
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert!(
        reply.text().contains("<Deleted><Key>empty</Key></Deleted>"),
        "{}",
        reply.text()
    );
    assert!(reply
        .text()
        .contains("<Deleted><Key>absent</Key></Deleted>"));
    assert_error(
        &cluster.send(ROOT, "GET", "/alpha/empty", &[], b"").await,
        404,
        "NoSuchKey",
    );
    cluster.stop().await;
}

/// What boto3 sends by default since 2025: aws-chunked, unsigned, CRC32 trailer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_chunked_put_with_checksum_trailer() {
    let cluster = Cluster::start().await;
    assert_eq!(
        cluster.send(ROOT, "PUT", "/chunks", &[], b"").await.status,
        StatusCode::OK
    );
    let data = random_bytes(200_000);
    let crc =
        base64::engine::general_purpose::STANDARD.encode(crc32fast::hash(&data).to_be_bytes());
    let frame = |crc: &str| {
        let mut body = Vec::new();
        for chunk in data.chunks(65536) {
            body.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
            body.extend_from_slice(chunk);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(format!("0\r\nx-amz-checksum-crc32:{crc}\r\n\r\n").as_bytes());
        body
    };
    let decoded = data.len().to_string();
    let headers = [
        ("content-encoding", "aws-chunked"),
        ("x-amz-decoded-content-length", decoded.as_str()),
        ("x-amz-trailer", "x-amz-checksum-crc32"),
    ];
    let put = cluster
        .send_as(ROOT, "PUT", "/chunks/k", &headers, &frame(&crc), true)
        .await;
    assert_eq!(put.status, StatusCode::OK, "{}", put.text());
    assert_eq!(put.header("etag"), format!("\"{}\"", md5_hex(&data)));
    let get = cluster.send(ROOT, "GET", "/chunks/k", &[], b"").await;
    assert!(get.body == data[..]);
    assert!(
        get.headers.get("content-encoding").is_none(),
        "{:?}",
        get.headers
    );

    let bad = cluster
        .send_as(
            ROOT,
            "PUT",
            "/chunks/bad",
            &headers,
            &frame("AAAAAA=="),
            true,
        )
        .await;
    assert_error(&bad, 400, "BadDigest");
    let missing = cluster.send(ROOT, "GET", "/chunks/bad", &[], b"").await;
    assert_error(&missing, 404, "NoSuchKey");
    cluster.stop().await;
}

fn tag(text: &str, name: &str) -> String {
    let open = format!("<{name}>");
    let start = text
        .find(&open)
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        + open.len();
    let end = text[start..].find(&format!("</{name}>")).unwrap() + start;
    text[start..end].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_upload_round_trip() {
    let cluster = Cluster::start().await;
    assert_eq!(
        cluster.send(ROOT, "PUT", "/mpu", &[], b"").await.status,
        StatusCode::OK
    );
    let created = cluster
        .send(ROOT, "POST", "/mpu/big?uploads", &[], b"")
        .await;
    assert_eq!(created.status, StatusCode::OK, "{}", created.text());
    let upload_id = tag(&created.text(), "UploadId");

    let bad_part = format!("/mpu/big?partNumber=0&uploadId={upload_id}");
    assert_error(
        &cluster.send(ROOT, "PUT", &bad_part, &[], b"x").await,
        400,
        "InvalidArgument",
    );
    let no_upload = "/mpu/big?partNumber=1&uploadId=nope";
    assert_error(
        &cluster.send(ROOT, "PUT", no_upload, &[], b"x").await,
        404,
        "NoSuchUpload",
    );

    let part1 = random_bytes(5 * 1024 * 1024);
    let part2 = random_bytes(1000);
    let mut etags = Vec::new();
    for (number, data) in [(1, &part1), (2, &part2)] {
        let path = format!("/mpu/big?partNumber={number}&uploadId={upload_id}");
        let reply = cluster.send(ROOT, "PUT", &path, &[], data).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        assert_eq!(reply.header("etag"), format!("\"{}\"", md5_hex(data)));
        etags.push(reply.header("etag").to_string());
    }
    let listed = cluster
        .send(
            ROOT,
            "GET",
            &format!("/mpu/big?uploadId={upload_id}&max-parts=1"),
            &[],
            b"",
        )
        .await;
    assert_eq!(listed.status, StatusCode::OK);
    assert!(
        listed.text().contains("<IsTruncated>true</IsTruncated>"),
        "{}",
        listed.text()
    );
    assert!(listed
        .text()
        .contains("<NextPartNumberMarker>1</NextPartNumberMarker>"));

    let complete_path = format!("/mpu/big?uploadId={upload_id}");
    let malformed = cluster
        .send(ROOT, "POST", &complete_path, &[], b"<Complete")
        .await;
    assert_error(&malformed, 400, "MalformedXML");
    let body = format!(
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>{}</ETag></Part>\
         <Part><PartNumber>2</PartNumber><ETag>{}</ETag></Part></CompleteMultipartUpload>",
        etags[0], etags[1]
    );
    let done = cluster
        .send(ROOT, "POST", &complete_path, &[], body.as_bytes())
        .await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text());
    assert!(
        tag(&done.text(), "ETag").ends_with("-2&quot;"),
        "{}",
        done.text()
    );

    let get = cluster.send(ROOT, "GET", "/mpu/big", &[], b"").await;
    assert_eq!(get.status, StatusCode::OK);
    assert_eq!(get.body.len(), part1.len() + part2.len());
    assert!(get.body[..part1.len()] == part1[..] && get.body[part1.len()..] == part2[..]);
    let second = cluster
        .send(ROOT, "GET", "/mpu/big?partNumber=2", &[], b"")
        .await;
    assert_eq!(second.status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(second.body, part2[..]);
    assert_eq!(second.header("x-amz-mp-parts-count"), "2");

    let other = cluster
        .send(ROOT, "POST", "/mpu/other?uploads", &[], b"")
        .await;
    let other_id = tag(&other.text(), "UploadId");
    let aborted = cluster
        .send(
            ROOT,
            "DELETE",
            &format!("/mpu/other?uploadId={other_id}"),
            &[],
            b"",
        )
        .await;
    assert_eq!(aborted.status, StatusCode::NO_CONTENT);
    let after_abort = cluster
        .send(
            ROOT,
            "GET",
            &format!("/mpu/other?uploadId={other_id}"),
            &[],
            b"",
        )
        .await;
    assert_error(&after_abort, 404, "NoSuchUpload");
    cluster.stop().await;
}
