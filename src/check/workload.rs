//! The clients: each runs one operation at a time on a random key and
//! records it; a client whose operation went unanswered goes on as a new
//! process. Every value written is unique and its body names it, so a GET
//! tells which write it saw, and its ETag is known, so a listing does too.
//! Writes go as single PUTs or, one in [`MULTIPART_ONE_IN`], as multipart
//! uploads whose Complete carries the precondition. A listing of a key
//! slot's prefix is recorded as a read of each key it could show; in a
//! versioned bucket, a listing of one key's versions is recorded whole.

use super::RunArgs;
use crate::s3_client::{S3Client, S3ClientError};
use anyhow::{bail, Result};
use bytes::Bytes;
use checker::history::{Value, Version};
use checker::{History, Op, Operation, Outcome};
use http::{Method, StatusCode};
use md5::{Digest, Md5};
use parking_lot::Mutex;
use quick_xml::events::Event;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A client's pause after an operation got no answer or was not sent.
const BACKOFF: std::time::Duration = std::time::Duration::from_millis(100);
/// One write in this many goes as a multipart upload.
const MULTIPART_ONE_IN: u32 = 5;

/// What one run shares between its clients.
struct Run {
    client: S3Client,
    args: RunArgs,
    started: Instant,
    next_value: AtomicU64,
    /// Operations started on each key slot; a slot's key changes every
    /// `ops_per_key` of them.
    started_on_slot: Vec<AtomicU64>,
    /// Values written (or tried) on each key: what `If-Match` may name.
    /// Its keys are every key used.
    tried: Mutex<BTreeMap<String, Vec<Value>>>,
    etags: Mutex<Etags>,
    operations: Mutex<Vec<Operation>>,
    /// Answers the model has no place for (403, 400...), with one example.
    unexpected: Mutex<(u64, Option<String>)>,
}

/// The ETag of every value written, both ways: what `If-Match` names, and
/// which value a listing's entry holds.
#[derive(Default)]
struct Etags {
    of_value: HashMap<Value, String>,
    value_of: HashMap<String, Value>,
}

/// An operation chosen, and how it is sent.
#[derive(Clone)]
struct Choice {
    op: Op,
    /// A write goes as a multipart upload.
    multipart: bool,
    /// The version a [`Op::GetVersion`] reads.
    version: Option<String>,
}

impl Choice {
    fn of(op: Op) -> Self {
        Self {
            op,
            multipart: false,
            version: None,
        }
    }
}

/// One entry of an S3 listing: its element's name and its fields' text.
type Entry = (String, HashMap<String, String>);

/// Runs the workload and the last reads; returns the history.
pub async fn run(args: &RunArgs) -> Result<History> {
    let client = args.s3.client()?;
    client.create_bucket(&args.bucket).await?;
    if args.versioned {
        let versioning =
            "<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>";
        let answer = client
            .exchange(
                Method::PUT,
                &format!("/{}?versioning", args.bucket),
                &[],
                Bytes::from(versioning),
            )
            .await?;
        if !answer.status.is_success() {
            bail!(
                "enabling versioning: {} {}",
                answer.status,
                String::from_utf8_lossy(&answer.body)
            );
        }
    }
    let seed = args.seed.unwrap_or_else(rand::random);
    eprintln!("seed {seed}");
    let run = Arc::new(Run {
        client,
        args: args.clone(),
        started: Instant::now(),
        next_value: AtomicU64::new(1),
        started_on_slot: (0..args.keys.max(1)).map(|_| AtomicU64::new(0)).collect(),
        tried: Mutex::new(BTreeMap::new()),
        etags: Mutex::new(Etags::default()),
        operations: Mutex::new(Vec::new()),
        unexpected: Mutex::new((0, None)),
    });
    let clients: Vec<_> = (0..args.clients)
        .map(|index| {
            let run = run.clone();
            let rng = StdRng::seed_from_u64(seed.wrapping_add(u64::from(index)));
            tokio::spawn(async move { run.client_loop(index, rng).await })
        })
        .collect();
    for client in clients {
        client.await?;
    }
    run.last_reads().await?;
    let (unexpected, example) = run.unexpected.lock().clone();
    if let Some(example) = example {
        eprintln!(
            "{unexpected} answers outside the model, recorded as indeterminate; one: {example}"
        );
    }
    let mut operations = std::mem::take(&mut *run.operations.lock());
    if !operations.iter().any(|o| o.outcome != Outcome::Unknown) {
        bail!("no operation got an answer");
    }
    operations.sort_by_key(|o| o.completed_ns);
    let seconds = run.started.elapsed().as_secs_f64();
    eprintln!(
        "{} operations in {seconds:.1} s ({:.0} a second)",
        operations.len(),
        operations.len() as f64 / seconds
    );
    Ok(History { operations })
}

impl Run {
    async fn client_loop(&self, index: u32, mut rng: StdRng) {
        let deadline = self.started + self.args.duration;
        let mut process = index;
        // The value this client last saw at each key: what its If-Match names.
        let mut seen: HashMap<String, Value> = HashMap::new();
        // The versions (not delete markers) it last saw listed at each key:
        // what its versioned GETs ask for.
        let mut listed: HashMap<String, Vec<String>> = HashMap::new();
        while Instant::now() < deadline {
            let slot = rng.gen_range(0..self.started_on_slot.len());
            let started = self.started_on_slot[slot].fetch_add(1, Ordering::Relaxed);
            let key = format!("k{slot}.{}", started / self.args.ops_per_key.max(1));
            let known = listed.get(&key).map_or(&[][..], Vec::as_slice);
            let choice = self.choose(&mut rng, &key, seen.get(&key).copied(), known);
            let (outcome, versions) = self.perform(process, &key, &choice).await;
            if let (Op::ListVersions, Some(versions)) = (choice.op, versions) {
                let ids = versions
                    .into_iter()
                    .filter(|v| v.value.is_some())
                    .map(|v| v.id);
                listed.insert(key.clone(), ids.collect());
            }
            if matches!(outcome, Outcome::Unknown | Outcome::Refused) {
                // A fault is under way: a client that retried at once would
                // fill the key's history with operations that say nothing.
                tokio::time::sleep(BACKOFF).await;
            }
            match (choice.op, outcome) {
                (_, Outcome::Unknown) => process += self.args.clients,
                (Op::GetVersion, _) => {}
                (_, Outcome::Read { value: Some(value) }) => drop(seen.insert(key, value)),
                (op, Outcome::Done) => match op.written() {
                    Some(value) => drop(seen.insert(key, value)),
                    None => drop(seen.remove(&key)),
                },
                _ => {}
            }
        }
    }

    /// The next operation: mostly GETs and plain PUTs, with listings,
    /// conditional writes and deletes mixed in; in a versioned bucket, a
    /// third of the GETs ask for a version this client saw listed.
    fn choose(
        &self,
        rng: &mut StdRng,
        key: &str,
        seen: Option<Value>,
        listed: &[String],
    ) -> Choice {
        let roll = rng.gen_range(0..100);
        if !(40..90).contains(&roll) {
            // Every key used is read at the end, those only read too.
            self.tried.lock().entry(key.to_string()).or_default();
            let op = match roll {
                0..10 if !listed.is_empty() => {
                    return Choice {
                        version: Some(listed[rng.gen_range(0..listed.len())].clone()),
                        ..Choice::of(Op::GetVersion)
                    }
                }
                0..30 => Op::Get,
                30..40 if self.args.versioned => Op::ListVersions,
                30..40 => Op::List,
                _ => Op::Delete,
            };
            return Choice::of(op);
        }
        let value = self.next_value.fetch_add(1, Ordering::Relaxed);
        let multipart = rng.gen_ratio(1, MULTIPART_ONE_IN);
        let etag = etag(&object_body(key, value, self.args.object_size), multipart);
        let mut etags = self.etags.lock();
        etags.value_of.insert(etag.clone(), value);
        etags.of_value.insert(value, etag);
        let mut tried = self.tried.lock();
        let on_key = tried.entry(key.to_string()).or_default();
        let expected =
            seen.or_else(|| (!on_key.is_empty()).then(|| on_key[rng.gen_range(0..on_key.len())]));
        on_key.push(value);
        let op = match (roll, expected) {
            (60..75, _) => Op::PutIfAbsent { value },
            (75..90, Some(expected)) => Op::PutIfMatch { expected, value },
            _ => Op::Put { value },
        };
        Choice {
            multipart,
            ..Choice::of(op)
        }
    }

    /// Runs the operation chosen and records it; its outcome for `key`,
    /// and the versions it listed or read.
    async fn perform(
        &self,
        process: u32,
        key: &str,
        choice: &Choice,
    ) -> (Outcome, Option<Vec<Version>>) {
        let timeout = self.args.op_timeout;
        if choice.op == Op::List {
            return (self.list(process, key).await, None);
        }
        // A multipart write's upload and part change nothing at the key:
        // only its Complete is recorded, and one that could not start is
        // a write never sent.
        let upload = if choice.multipart {
            match tokio::time::timeout(timeout, self.start_upload(key, choice.op)).await {
                Ok(Some(upload)) => Some(upload),
                _ => return (Outcome::Refused, None),
            }
        } else {
            None
        };
        let invoked_ns = self.now_ns();
        let (outcome, versions) =
            tokio::time::timeout(timeout, self.send(key, choice, upload.as_deref()))
                .await
                .unwrap_or((Outcome::Unknown, None));
        let completed_ns = self.now_ns();
        if let (Some(upload), false) = (&upload, outcome == Outcome::Done) {
            self.abort_upload(key, upload).await;
        }
        self.operations.lock().push(Operation {
            multipart: choice.multipart,
            versions: versions.clone(),
            ..Operation::new(
                process,
                key.to_string(),
                choice.op,
                invoked_ns,
                completed_ns,
                outcome,
            )
        });
        (outcome, versions)
    }

    /// Lists the prefix of `key`'s slot and records a read of every key
    /// it could show: the slot's keys of this generation and the last (an
    /// older one is no longer written), and any key nobody wrote (a
    /// phantom, which reads as value 0). Returns the read of `key`.
    async fn list(&self, process: u32, key: &str) -> Outcome {
        let (prefix, generation) = key.split_once('.').unwrap_or((key, ""));
        let prefix = format!("{prefix}.");
        let generation: u64 = generation.parse().unwrap_or(0);
        let path = format!("/{}?list-type=2&prefix={prefix}", self.args.bucket);
        let invoked_ns = self.now_ns();
        let answer = tokio::time::timeout(
            self.args.op_timeout,
            self.client.exchange(Method::GET, &path, &[], Bytes::new()),
        )
        .await;
        let completed_ns = self.now_ns();
        let entries = match answer {
            Ok(Ok(answer)) if answer.status == StatusCode::OK => {
                match self.entries_of(&answer.body, &["Contents"]) {
                    Some(entries) => entries,
                    None => return Outcome::Unknown,
                }
            }
            Ok(Ok(answer)) if answer.status.is_server_error() => return Outcome::Unknown,
            Ok(Ok(answer)) => {
                return self.outside_model(format!("listing {prefix}: {}", answer.status))
            }
            Ok(Err(e)) if never_sent(&e) => return Outcome::Refused,
            _ => return Outcome::Unknown,
        };
        let listed: HashMap<String, Value> = entries
            .into_iter()
            .filter_map(|(_, fields)| {
                let value = self.value_of(fields.get("ETag")?);
                Some((fields.get("Key")?.clone(), value))
            })
            .collect();
        let tried = self.tried.lock();
        let recent = |name: &str| {
            name.strip_prefix(&prefix)
                .and_then(|g| g.parse::<u64>().ok())
                .is_some_and(|g| g + 1 >= generation)
        };
        let mut shown: Vec<String> = tried
            .keys()
            .filter(|name| name.starts_with(&prefix) && recent(name))
            .cloned()
            .collect();
        shown.extend(
            listed
                .keys()
                .filter(|name| !tried.contains_key(*name))
                .cloned(),
        );
        drop(tried);
        let mut operations = self.operations.lock();
        for name in shown {
            let outcome = Outcome::Read {
                value: listed.get(&name).copied(),
            };
            operations.push(Operation::new(
                process,
                name,
                Op::List,
                invoked_ns,
                completed_ns,
                outcome,
            ));
        }
        Outcome::Read {
            value: listed.get(key).copied(),
        }
    }

    /// Starts a multipart upload of `op`'s value at `key` and uploads its
    /// one part; the upload's id.
    async fn start_upload(&self, key: &str, op: Op) -> Option<String> {
        let path = format!("/{}/{key}", self.args.bucket);
        let created = self
            .client
            .exchange(Method::POST, &format!("{path}?uploads"), &[], Bytes::new())
            .await
            .ok()?;
        let (_, fields) = self
            .entries_of(&created.body, &["InitiateMultipartUploadResult"])?
            .pop()?;
        let upload = fields.get("UploadId")?.clone();
        let body = object_body(key, op.written()?, self.args.object_size);
        let part = self
            .client
            .exchange(
                Method::PUT,
                &format!("{path}?partNumber=1&uploadId={upload}"),
                &[],
                body,
            )
            .await;
        if part.is_ok_and(|part| part.status == StatusCode::OK) {
            Some(upload)
        } else {
            self.abort_upload(key, &upload).await;
            None
        }
    }

    /// Aborts an upload that did not complete, if it is still there.
    async fn abort_upload(&self, key: &str, upload: &str) {
        let path = format!("/{}/{key}?uploadId={upload}", self.args.bucket);
        let aborting = self
            .client
            .exchange(Method::DELETE, &path, &[], Bytes::new());
        drop(tokio::time::timeout(self.args.op_timeout, aborting).await);
    }

    /// Reads every key used once more after the clients stopped, trying
    /// until a read is answered: a write acknowledged before must show in it.
    async fn last_reads(&self) -> Result<()> {
        let keys: Vec<String> = self.tried.lock().keys().cloned().collect();
        let mut process = self.args.clients * 1_000_000;
        let read = Choice::of(if self.args.versioned {
            Op::ListVersions
        } else {
            Op::Get
        });
        for key in keys {
            let since = Instant::now();
            // Until a read is answered: one that was not sent (refused)
            // says no more than one that got no answer.
            while matches!(
                self.perform(process, &key, &read).await.0,
                Outcome::Unknown | Outcome::Refused
            ) {
                if since.elapsed() > self.args.final_read_timeout {
                    bail!(
                        "no answer to a last read of {key} within {:?}",
                        self.args.final_read_timeout
                    );
                }
                process += 1;
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        }
        Ok(())
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Sends a single-key operation (a write's Complete when `upload` is
    /// given); its outcome, and the versions listed or read.
    async fn send(
        &self,
        name: &str,
        choice: &Choice,
        upload: Option<&str>,
    ) -> (Outcome, Option<Vec<Version>>) {
        let op = choice.op;
        let path = format!("/{}/{name}", self.args.bucket);
        let size = self.args.object_size;
        let mut headers = vec![];
        let body = op
            .written()
            .map(|value| object_body(name, value, size))
            .unwrap_or_default();
        match op {
            Op::PutIfAbsent { .. } => headers.push(("if-none-match", "*".to_string())),
            Op::PutIfMatch { expected, .. } => {
                let etag = self
                    .etags
                    .lock()
                    .of_value
                    .get(&expected)
                    .cloned()
                    .unwrap_or_default();
                headers.push(("if-match", format!("\"{etag}\"")));
            }
            _ => {}
        }
        let (method, path, body) = match (op, upload) {
            (Op::Get, _) => (Method::GET, path, Bytes::new()),
            (Op::GetVersion, _) => {
                let id = choice.version.as_deref().unwrap_or_default();
                (Method::GET, format!("{path}?versionId={id}"), Bytes::new())
            }
            (Op::ListVersions, _) => (
                Method::GET,
                format!("/{}?versions&prefix={name}", self.args.bucket),
                Bytes::new(),
            ),
            (Op::Delete, _) => (Method::DELETE, path, Bytes::new()),
            (_, Some(upload)) => (
                Method::POST,
                format!("{path}?uploadId={upload}"),
                complete_document(&etag(&body, false)),
            ),
            _ => (Method::PUT, path, body),
        };
        match self.client.exchange(method, &path, &headers, body).await {
            Ok(answer) if op == Op::ListVersions => {
                self.versions(name, answer.status, &answer.body)
            }
            Ok(answer) => {
                let outcome = self.outcome(op, name, answer.status, &answer.body);
                let read = match (op, outcome, choice.version.clone()) {
                    (Op::GetVersion, Outcome::Read { value }, Some(id)) => {
                        Some(vec![Version { id, value }])
                    }
                    _ => None,
                };
                (outcome, read)
            }
            // Never sent: nothing can have changed.
            Err(e) if never_sent(&e) => (Outcome::Refused, None),
            Err(S3ClientError::Http(_) | S3ClientError::Body(_)) => (Outcome::Unknown, None),
            Err(e) => (self.outside_model(format!("{op:?} on {name}: {e}")), None),
        }
    }

    /// What an answer means for `op`. A Complete may answer 200 with an
    /// error document: it counts as that error's status.
    fn outcome(&self, op: Op, name: &str, status: StatusCode, body: &[u8]) -> Outcome {
        let status = match (status.as_u16(), op) {
            (200, Op::Put { .. } | Op::PutIfAbsent { .. } | Op::PutIfMatch { .. }) => {
                match self.entries_of(body, &["Error"]).and_then(|mut e| e.pop()) {
                    Some((_, error)) => match error.get("Code").map(String::as_str) {
                        Some("PreconditionFailed") => 412,
                        Some("NoSuchKey") => 404,
                        Some("ConditionalRequestConflict") => 409,
                        _ => 500,
                    },
                    None => 200,
                }
            }
            (status, _) => status,
        };
        match (op, status) {
            (_, 500..=599) => Outcome::Unknown,
            (Op::Get | Op::GetVersion, 200) => Outcome::Read {
                value: Some(read_value(name, body, self.args.object_size)),
            },
            (Op::Get | Op::GetVersion, 404) => Outcome::Read { value: None },
            (Op::Delete, 200 | 204) => Outcome::Done,
            (Op::Put { .. } | Op::PutIfAbsent { .. } | Op::PutIfMatch { .. }, 200) => Outcome::Done,
            (Op::PutIfAbsent { .. } | Op::PutIfMatch { .. }, 412) => Outcome::PreconditionFailed,
            (Op::PutIfMatch { .. }, 404) => Outcome::NotFound,
            (Op::PutIfAbsent { .. } | Op::PutIfMatch { .. }, 409) => Outcome::Refused,
            _ => self.outside_model(format!(
                "{op:?} on {name}: {status} {}",
                String::from_utf8_lossy(&body[..body.len().min(200)])
            )),
        }
    }

    /// The versions of `name` a ListObjectVersions answer lists, oldest
    /// first, and its read: the latest version's value (None for a delete
    /// marker or no version).
    fn versions(
        &self,
        name: &str,
        status: StatusCode,
        body: &[u8],
    ) -> (Outcome, Option<Vec<Version>>) {
        if status.is_server_error() {
            return (Outcome::Unknown, None);
        }
        let entries = match status {
            StatusCode::OK => self.entries_of(body, &["Version", "DeleteMarker"]),
            _ => None,
        };
        let Some(entries) = entries else {
            return (
                self.outside_model(format!("versions of {name}: {status}")),
                None,
            );
        };
        let mut versions: Vec<Version> = entries
            .into_iter()
            .filter(|(_, fields)| fields.get("Key").map(String::as_str) == Some(name))
            .map(|(element, fields)| Version {
                id: fields.get("VersionId").cloned().unwrap_or_default(),
                value: (element == "Version")
                    .then(|| self.value_of(fields.get("ETag").map_or("", String::as_str))),
            })
            .collect();
        // Listed newest first.
        versions.reverse();
        let latest = versions.last().and_then(|v| v.value);
        (Outcome::Read { value: latest }, Some(versions))
    }

    /// The value whose ETag (quoted or not) this is; 0, which no write
    /// wrote, for one nobody's.
    fn value_of(&self, etag: &str) -> Value {
        let etag = etag.trim_matches('"');
        self.etags.lock().value_of.get(etag).copied().unwrap_or(0)
    }

    /// The entries of a listing (None, counted outside the model, when it
    /// does not parse or is cut short).
    fn entries_of(&self, xml: &[u8], names: &[&str]) -> Option<Vec<Entry>> {
        match entries(xml, names) {
            Ok(entries) if !is_truncated(&entries) => Some(entries),
            Ok(_) => {
                self.outside_model("a listing was cut short".to_string());
                None
            }
            Err(e) => {
                self.outside_model(format!("an answer did not parse: {e}"));
                None
            }
        }
    }

    fn outside_model(&self, what: String) -> Outcome {
        let mut unexpected = self.unexpected.lock();
        unexpected.0 += 1;
        unexpected.1.get_or_insert(what);
        Outcome::Unknown
    }
}

/// Whether a request that failed was never sent (no connection): nothing
/// at the server can have changed.
fn never_sent(error: &S3ClientError) -> bool {
    matches!(error, S3ClientError::Http(e) if e.is_connect())
}

/// Whether a listing says it holds only part of what matched.
fn is_truncated(entries: &[Entry]) -> bool {
    entries.iter().any(|(name, _)| name == "IsTruncated")
}

/// Every element named in `names` (and every `IsTruncated` that says
/// true), in document order, with the text of each field inside it.
fn entries(xml: &[u8], names: &[&str]) -> Result<Vec<Entry>, quick_xml::Error> {
    let mut reader = quick_xml::Reader::from_reader(xml);
    reader.config_mut().trim_text(true);
    let mut found = Vec::new();
    let mut entry: Option<Entry> = None;
    let mut field: Option<String> = None;
    loop {
        match reader.read_event()? {
            Event::Start(start) => {
                let name = String::from_utf8_lossy(start.name().as_ref()).into_owned();
                if entry.is_some() {
                    field = Some(name);
                } else if names.contains(&name.as_str()) {
                    entry = Some((name, HashMap::new()));
                } else if name == "IsTruncated" {
                    field = Some(name);
                }
            }
            Event::Text(text) => {
                let text = text.unescape()?.into_owned();
                match (&mut entry, field.as_deref()) {
                    (Some((_, fields)), Some(name)) => drop(fields.insert(name.to_string(), text)),
                    (None, Some("IsTruncated")) if text == "true" => {
                        found.push(("IsTruncated".to_string(), HashMap::new()));
                    }
                    _ => {}
                }
            }
            Event::End(end) => {
                let name = end.name();
                if entry
                    .as_ref()
                    .is_some_and(|(n, _)| n.as_bytes() == name.as_ref())
                {
                    found.extend(entry.take());
                }
                field = None;
            }
            Event::Eof => return Ok(found),
            _ => {}
        }
    }
}

/// The ETag S3 gives `body` written whole, or as a one-part multipart
/// upload (the MD5 of the part's MD5, then the part count).
fn etag(body: &[u8], multipart: bool) -> String {
    let digest = Md5::digest(body);
    if multipart {
        format!("{}-1", hex::encode(Md5::digest(digest)))
    } else {
        hex::encode(digest)
    }
}

/// A CompleteMultipartUpload body naming one part.
fn complete_document(part_etag: &str) -> Bytes {
    Bytes::from(format!(
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>\"{part_etag}\"</ETag></Part></CompleteMultipartUpload>"
    ))
}

/// The body of `value` at key `name`: a line naming both, then filler
/// derived from the value, `size` bytes in all.
fn object_body(name: &str, value: Value, size: u64) -> Bytes {
    let mut body = format!("tessera-check {name} {value}\n").into_bytes();
    let filler = value.to_le_bytes();
    let size = usize::try_from(size).unwrap_or(usize::MAX).max(body.len());
    let mut i = 0;
    while body.len() < size {
        body.push(filler[i % filler.len()] ^ (i / filler.len()) as u8);
        i += 1;
    }
    Bytes::from(body)
}

/// The value a GET's body holds: 0 (which no write wrote, so the check
/// fails on it) when the body is not exactly what that value's write sent.
fn read_value(name: &str, body: &[u8], size: u64) -> Value {
    let first_line = body.split(|b| *b == b'\n').next().unwrap_or_default();
    let named = std::str::from_utf8(first_line).ok().and_then(|line| {
        let mut words = line.split(' ');
        let (tag, key, value) = (words.next()?, words.next()?, words.next()?);
        (tag == "tessera-check" && key == name).then(|| value.parse().ok())?
    });
    match named {
        Some(value) if object_body(name, value, size) == body => value,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_names_its_value_and_any_damage_reads_as_nobodys() {
        let body = object_body("k3", 77, 16 * 1024);
        assert_eq!(body.len(), 16 * 1024);
        assert_eq!(read_value("k3", &body, 16 * 1024), 77);
        assert_eq!(read_value("k4", &body, 16 * 1024), 0, "another key's body");
        let mut damaged = body.to_vec();
        damaged[9000] ^= 1;
        assert_eq!(read_value("k3", &damaged, 16 * 1024), 0);
        assert_eq!(read_value("k3", &body[..100], 16 * 1024), 0, "cut short");
        assert_ne!(object_body("k3", 78, 64), object_body("k3", 77, 64));
    }

    #[test]
    fn listings_parse_in_document_order() {
        let xml = br#"<?xml version="1.0"?><ListVersionsResult><Name>b</Name><IsTruncated>false</IsTruncated>
            <Version><Key>k1.0</Key><VersionId>v3</VersionId><ETag>&quot;ab&quot;</ETag><Owner><ID>o</ID></Owner></Version>
            <DeleteMarker><Key>k1.0</Key><VersionId>v2</VersionId></DeleteMarker>
            <Version><Key>k1.0</Key><VersionId>v1</VersionId><ETag>&quot;cd&quot;</ETag></Version></ListVersionsResult>"#;
        let found = entries(xml, &["Version", "DeleteMarker"]).unwrap();
        let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["Version", "DeleteMarker", "Version"]);
        assert_eq!(found[0].1["ETag"], "\"ab\"");
        assert_eq!(found[1].1["VersionId"], "v2");
        assert!(!is_truncated(&found));
        let cut = br#"<ListBucketResult><IsTruncated>true</IsTruncated><Contents><Key>a</Key></Contents></ListBucketResult>"#;
        assert!(is_truncated(&entries(cut, &["Contents"]).unwrap()));
    }

    #[test]
    fn a_one_part_upload_has_the_etag_s3_gives_it() {
        // As AWS computes it: the MD5 of the parts' MD5s, then their count.
        assert_eq!(etag(b"part", false), "f4c9385f1902f7334b00b9b4ecd164de");
        assert_eq!(etag(b"part", true), "1819d1a8700e59901a48215b8577ac07-1");
    }
}
