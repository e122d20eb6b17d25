//! In-process cluster: MetaService, five datanodes and the S3 router on
//! 127.0.0.1:0, driven over real HTTP with requests signed by aws-sigv4.

use base64::Engine;
use http::StatusCode;
use md5::{Digest, Md5};
use meta_api::{BucketGrant, BucketRight, LimitKey};
use std::time::Duration;
use test_support::data::{md5_hex, random_bytes};
use test_support::s3::{Cluster, Reply, ROOT};

/// Heartbeats of the datanodes.
const HEARTBEAT: Duration = Duration::from_millis(500);

fn md5_b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(Md5::digest(data))
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
    let cluster = Cluster::start(HEARTBEAT).await;
    let created = cluster.send(ROOT, "PUT", "/photos", &[], b"").await;
    assert_eq!(created.status, StatusCode::OK, "{}", created.text());
    assert!(!created.header("x-amz-request-id").is_empty());
    assert!(!created.header("x-amz-id-2").is_empty());
    let again = cluster.send(ROOT, "PUT", "/photos", &[], b"").await;
    assert_error(&again, 409, "BucketAlreadyOwnedByYou");
    let bad_name = cluster.send(ROOT, "PUT", "/Bad_Name", &[], b"").await;
    assert_error(&bad_name, 400, "InvalidBucketName");

    // More than one stripe and more than one block group.
    let data = random_bytes(9 * 1024 * 1024 + 12345, 1);
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
    let cluster = Cluster::start(HEARTBEAT).await;
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
    // A refused body ends its connection, and says so; other answers don't.
    assert_eq!(bad.header("connection"), "close");
    let no_upload = cluster
        .send(
            ROOT,
            "PUT",
            "/alpha/k?partNumber=2&uploadId=missing",
            &[("expect", "100-continue")],
            b"late",
        )
        .await;
    assert_error(&no_upload, 404, "NoSuchUpload");
    assert_eq!(no_upload.header("connection"), "close");
    let missing = cluster.send(ROOT, "GET", "/alpha/k", &[], b"").await;
    assert_error(&missing, 404, "NoSuchKey");
    assert!(
        missing.headers.get("connection").is_none(),
        "an error to a request without a body keeps the connection"
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
    // Longer than the inline limit: in blocks, laid out as asked.
    let blocks = random_bytes(64 * 1024, 3);
    let replicated = cluster
        .send(
            ROOT,
            "PUT",
            "/alpha/r",
            &[("x-tessera-replication", "replicated-3")],
            &blocks,
        )
        .await;
    assert_eq!(replicated.status, StatusCode::OK, "{}", replicated.text());
    let head = cluster.send(ROOT, "HEAD", "/alpha/r", &[], b"").await;
    assert_eq!(head.header("x-tessera-replication"), "replicated-3");
    // Small enough for its record: the header names where it is.
    let small = cluster
        .send(
            ROOT,
            "PUT",
            "/alpha/s",
            &[("x-tessera-replication", "replicated-3")],
            data,
        )
        .await;
    assert_eq!(small.status, StatusCode::OK, "{}", small.text());
    let head = cluster.send(ROOT, "HEAD", "/alpha/s", &[], b"").await;
    assert_eq!(head.header("x-tessera-replication"), "inline");

    let anonymous = cluster.send(None, "GET", "/alpha/r", &[], b"").await;
    assert_error(&anonymous, 403, "AccessDenied");
    let website = cluster.send(ROOT, "GET", "/alpha?website", &[], b"").await;
    assert_error(&website, 501, "NotImplemented");
    assert!(website.text().contains("GetBucketWebsite"));
    let policy = cluster.send(ROOT, "GET", "/alpha?policy", &[], b"").await;
    assert_error(&policy, 404, "NoSuchBucketPolicy");
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
    assert_eq!(keys, ["empty", "r", "s"]);

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
    let cluster = Cluster::start(HEARTBEAT).await;
    assert_eq!(
        cluster.send(ROOT, "PUT", "/chunks", &[], b"").await.status,
        StatusCode::OK
    );
    let data = random_bytes(200_000, 2);
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
    let cluster = Cluster::start(HEARTBEAT).await;
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

    let part1 = random_bytes(5 * 1024 * 1024, 3);
    let part2 = random_bytes(1000, 4);
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

/// CopyObject and UploadPartCopy read their source: a caller who may write
/// the destination but not read the source bucket is refused, whether the
/// source belongs to another user or lies outside its key's limits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_need_read_access_to_the_source() {
    let cluster = Cluster::start(HEARTBEAT).await;
    let (key, secret) = cluster.user("carol").await;
    let limit = LimitKey {
        access_key: key.clone(),
        grants: Some(vec![BucketGrant {
            bucket: "carol-shared".into(),
            right: BucketRight::ReadWrite,
        }]),
    };
    let (full_key, full_secret) = cluster.user_key("carol").await;
    let carol = Some((full_key.as_str(), full_secret.as_str()));
    for bucket in ["/carol-shared", "/carol-secret"] {
        assert_eq!(
            cluster.send(carol, "PUT", bucket, &[], b"").await.status,
            StatusCode::OK
        );
    }
    cluster
        .send(carol, "PUT", "/carol-secret/k", &[], b"secret")
        .await;
    cluster.send(ROOT, "PUT", "/rootb", &[], b"").await;
    cluster.send(ROOT, "PUT", "/rootb/k", &[], b"root's").await;
    cluster.cluster.admin.call(limit).await.unwrap();
    let limited = Some((key.as_str(), secret.as_str()));

    for (who, source) in [(limited, "carol-secret/k"), (carol, "rootb/k")] {
        let copy = [("x-amz-copy-source", source)];
        let refused = cluster
            .send(who, "PUT", "/carol-shared/taken", &copy, b"")
            .await;
        assert_error(&refused, 403, "AccessDenied");
        let created = cluster
            .send(who, "POST", "/carol-shared/part?uploads", &[], b"")
            .await;
        assert_eq!(created.status, StatusCode::OK, "{}", created.text());
        let part = format!(
            "/carol-shared/part?partNumber=1&uploadId={}",
            tag(&created.text(), "UploadId")
        );
        assert_error(
            &cluster.send(who, "PUT", &part, &copy, b"").await,
            403,
            "AccessDenied",
        );
    }
    let missing = cluster
        .send(carol, "GET", "/carol-shared/taken", &[], b"")
        .await;
    assert_error(&missing, 404, "NoSuchKey");
    // The same key copies within the bucket it may read.
    let copy = [("x-amz-copy-source", "carol-shared/part-src")];
    cluster
        .send(limited, "PUT", "/carol-shared/part-src", &[], b"mine")
        .await;
    let allowed = cluster
        .send(limited, "PUT", "/carol-shared/copied", &copy, b"")
        .await;
    assert_eq!(allowed.status, StatusCode::OK, "{}", allowed.text());
    let got = cluster
        .send(limited, "GET", "/carol-shared/copied", &[], b"")
        .await;
    assert_eq!(&got.body[..], b"mine");
    cluster.stop().await;
}

/// More PUTs at once than the gateway streams: the rest wait their turn,
/// and every one lands whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn puts_past_the_upload_bound_wait_and_all_land() {
    let mut config = gateway::GatewayConfig::new("us-east-1");
    config.max_concurrent_uploads = 1;
    let cluster = Cluster::start_with(HEARTBEAT, config).await;
    let created = cluster.send(ROOT, "PUT", "/queued", &[], b"").await;
    assert_eq!(created.status, StatusCode::OK, "{}", created.text());
    let bodies: Vec<Vec<u8>> = (0..6)
        .map(|i| random_bytes(3 * 1024 * 1024 + 7, 10 + i))
        .collect();
    let puts = bodies.iter().enumerate().map(|(i, body)| {
        let cluster = &cluster;
        async move {
            cluster
                .send(ROOT, "PUT", &format!("/queued/k{i}"), &[], body)
                .await
        }
    });
    for (put, body) in futures::future::join_all(puts).await.iter().zip(&bodies) {
        assert_eq!(put.status, StatusCode::OK, "{}", put.text());
        assert_eq!(put.header("etag"), format!("\"{}\"", md5_hex(body)));
    }
    for (i, body) in bodies.iter().enumerate() {
        let got = cluster
            .send(ROOT, "GET", &format!("/queued/k{i}"), &[], b"")
            .await;
        assert!(got.body == *body, "k{i} reads back whole");
    }
    cluster.stop().await;
}
