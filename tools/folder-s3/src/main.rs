//! A thin S3 server over a plain folder: what storing objects costs with no
//! redundancy, no metadata service and no authentication, as the baseline
//! of the small-object PUT benchmark (`scripts/bench/small-puts.sh`).
//!
//! `PUT /bucket` makes a folder; `PUT /bucket/key` streams the body into a
//! temporary file while hashing it (MD5, the ETag S3 clients check), fsyncs
//! it, renames it into place and fsyncs the folder, as a durable store must;
//! `GET` and `HEAD` read it back. Signatures are accepted unchecked.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::put;
use axum::Router;
use clap::Parser;
use futures::StreamExt;
use md5::{Digest, Md5};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::AsyncWriteExt;

#[derive(Parser)]
struct Args {
    /// Folder holding one folder per bucket.
    #[arg(long)]
    root: PathBuf,
    /// Address to listen on; port 0 picks one, printed as `LISTENING ADDR`.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
}

struct Folder {
    root: PathBuf,
    /// Names of temporary files, unique within the process.
    next_tmp: AtomicU64,
}

type Shared = State<Arc<Folder>>;

fn failed(e: impl std::fmt::Display) -> Response {
    (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()
}

/// Bucket and key names become paths: refuse anything that leaves the root.
fn safe(name: &str) -> bool {
    !name.is_empty()
        && name
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

async fn create_bucket(State(folder): Shared, Path(bucket): Path<String>) -> Response {
    if !safe(&bucket) || bucket.contains('/') {
        return StatusCode::BAD_REQUEST.into_response();
    }
    match tokio::fs::create_dir_all(folder.root.join(&bucket)).await {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e) => failed(e),
    }
}

async fn put_object(
    State(folder): Shared,
    Path((bucket, key)): Path<(String, String)>,
    body: Body,
) -> Response {
    if !safe(&bucket) || !safe(&key) {
        return StatusCode::BAD_REQUEST.into_response();
    }
    let target = folder.root.join(&bucket).join(&key);
    let Some(dir) = target.parent().map(PathBuf::from) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    if let Err(e) = tokio::fs::create_dir_all(&dir).await {
        return failed(e);
    }
    let tmp = folder.root.join(&bucket).join(format!(
        ".tmp-{}",
        folder.next_tmp.fetch_add(1, Ordering::Relaxed)
    ));
    let stored = async {
        let mut file = tokio::fs::File::create(&tmp).await?;
        let mut md5 = Md5::new();
        let mut stream = body.into_data_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(std::io::Error::other)?;
            md5.update(&chunk);
            file.write_all(&chunk).await?;
        }
        file.sync_all().await?;
        tokio::fs::rename(&tmp, &target).await?;
        tokio::fs::File::open(&dir).await?.sync_all().await?;
        Ok::<_, std::io::Error>(hex::encode(md5.finalize()))
    };
    match stored.await {
        Ok(etag) => (StatusCode::OK, [(header::ETAG, format!("\"{etag}\""))]).into_response(),
        Err(e) => {
            let _ = tokio::fs::remove_file(&tmp).await;
            failed(e)
        }
    }
}

async fn get_object(
    State(folder): Shared,
    Path((bucket, key)): Path<(String, String)>,
) -> Response {
    if !safe(&bucket) || !safe(&key) {
        return StatusCode::BAD_REQUEST.into_response();
    }
    match tokio::fs::read(folder.root.join(&bucket).join(&key)).await {
        Ok(bytes) => bytes.into_response(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => StatusCode::NOT_FOUND.into_response(),
        Err(e) => failed(e),
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.root)?;
    let folder = Arc::new(Folder {
        root: args.root,
        next_tmp: AtomicU64::new(0),
    });
    let app = Router::new()
        .route("/{bucket}", put(create_bucket))
        .route("/{bucket}/{*key}", put(put_object).get(get_object))
        .with_state(folder);
    let listener = tokio::net::TcpListener::bind(&args.listen).await?;
    println!("LISTENING {}", listener.local_addr()?);
    axum::serve(listener, app).await
}
