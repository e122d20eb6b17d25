//! The clients: each runs one operation at a time on a random key and
//! records it; a client whose operation went unanswered goes on as a new
//! process. Every value written is unique and its body names it, so a GET
//! tells which write it saw.

use super::RunArgs;
use crate::s3_client::{S3Client, S3ClientError};
use anyhow::{bail, Result};
use bytes::Bytes;
use checker::history::Value;
use checker::{History, Op, Operation, Outcome};
use http::{Method, StatusCode};
use md5::{Digest, Md5};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A client's pause after an operation got no answer or was not sent.
const BACKOFF: std::time::Duration = std::time::Duration::from_millis(100);

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
    operations: Mutex<Vec<Operation>>,
    /// Answers the model has no place for (403, 400...), with one example.
    unexpected: Mutex<(u64, Option<String>)>,
}

/// Runs the workload and the last reads; returns the history.
pub async fn run(args: &RunArgs) -> Result<History> {
    let client = args.s3.client()?;
    client.create_bucket(&args.bucket).await?;
    let seed = args.seed.unwrap_or_else(rand::random);
    eprintln!("seed {seed}");
    let run = Arc::new(Run {
        client,
        args: args.clone(),
        started: Instant::now(),
        next_value: AtomicU64::new(1),
        started_on_slot: (0..args.keys.max(1)).map(|_| AtomicU64::new(0)).collect(),
        tried: Mutex::new(BTreeMap::new()),
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
        while Instant::now() < deadline {
            let slot = rng.gen_range(0..self.started_on_slot.len());
            let started = self.started_on_slot[slot].fetch_add(1, Ordering::Relaxed);
            let key = format!("k{slot}.{}", started / self.args.ops_per_key.max(1));
            let op = self.choose(&mut rng, &key, seen.get(&key).copied());
            let outcome = self.perform(process, &key, op).await;
            if matches!(outcome, Outcome::Unknown | Outcome::Refused) {
                // A fault is under way: a client that retried at once would
                // fill the key's history with operations that say nothing.
                tokio::time::sleep(BACKOFF).await;
            }
            match (op, outcome) {
                (_, Outcome::Unknown) => process += self.args.clients,
                (Op::Get, Outcome::Read { value: Some(value) }) => drop(seen.insert(key, value)),
                (_, Outcome::Done) => match op.written() {
                    Some(value) => drop(seen.insert(key, value)),
                    None => drop(seen.remove(&key)),
                },
                _ => {}
            }
        }
    }

    /// The next operation: mostly GETs and plain PUTs, with conditional
    /// writes and deletes mixed in.
    fn choose(&self, rng: &mut StdRng, key: &str, seen: Option<Value>) -> Op {
        let roll = rng.gen_range(0..100);
        if !(40..90).contains(&roll) {
            // Every key used is read at the end, those only read too.
            self.tried.lock().entry(key.to_string()).or_default();
            return if roll < 40 { Op::Get } else { Op::Delete };
        }
        let value = self.next_value.fetch_add(1, Ordering::Relaxed);
        let mut tried = self.tried.lock();
        let on_key = tried.entry(key.to_string()).or_default();
        let expected =
            seen.or_else(|| (!on_key.is_empty()).then(|| on_key[rng.gen_range(0..on_key.len())]));
        on_key.push(value);
        match (roll, expected) {
            (60..75, _) => Op::PutIfAbsent { value },
            (75..90, Some(expected)) => Op::PutIfMatch { expected, value },
            _ => Op::Put { value },
        }
    }

    /// Runs `op` and records it.
    async fn perform(&self, process: u32, key: &str, op: Op) -> Outcome {
        let invoked_ns = self.now_ns();
        let outcome = tokio::time::timeout(self.args.op_timeout, self.send(key, op))
            .await
            .unwrap_or(Outcome::Unknown);
        let completed_ns = self.now_ns();
        self.operations.lock().push(Operation {
            process,
            key: key.to_string(),
            op,
            invoked_ns,
            completed_ns,
            outcome,
        });
        outcome
    }

    /// Reads every key used once more after the clients stopped, trying
    /// until a read is answered: a write acknowledged before must show in it.
    async fn last_reads(&self) -> Result<()> {
        let keys: Vec<String> = self.tried.lock().keys().cloned().collect();
        let mut process = self.args.clients * 1_000_000;
        for key in keys {
            let since = Instant::now();
            // Until a read is answered: one that was not sent (refused)
            // says no more than one that got no answer.
            while matches!(
                self.perform(process, &key, Op::Get).await,
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

    async fn send(&self, name: &str, op: Op) -> Outcome {
        let path = format!("/{}/{name}", self.args.bucket);
        let size = self.args.object_size;
        let (method, headers, body) = match op {
            Op::Get => (Method::GET, vec![], Bytes::new()),
            Op::Delete => (Method::DELETE, vec![], Bytes::new()),
            Op::Put { value } => (Method::PUT, vec![], object_body(name, value, size)),
            Op::PutIfAbsent { value } => (
                Method::PUT,
                vec![("if-none-match", "*".to_string())],
                object_body(name, value, size),
            ),
            Op::PutIfMatch { expected, value } => {
                let etag = hex::encode(Md5::digest(object_body(name, expected, size)));
                (
                    Method::PUT,
                    vec![("if-match", format!("\"{etag}\""))],
                    object_body(name, value, size),
                )
            }
        };
        let answer = self.client.exchange(method, &path, &headers, body).await;
        match answer {
            Ok(answer) => self.outcome(op, name, answer.status, &answer.body),
            // Never sent: nothing can have changed.
            Err(S3ClientError::Http(e)) if e.is_connect() => Outcome::Refused,
            Err(S3ClientError::Http(_) | S3ClientError::Body(_)) => Outcome::Unknown,
            Err(e) => self.outside_model(format!("{op:?} on {name}: {e}")),
        }
    }

    /// What an answer means for `op`.
    fn outcome(&self, op: Op, name: &str, status: StatusCode, body: &[u8]) -> Outcome {
        match (op, status.as_u16()) {
            (_, 500..=599) => Outcome::Unknown,
            (Op::Get, 200) => Outcome::Read {
                value: Some(read_value(name, body, self.args.object_size)),
            },
            (Op::Get, 404) => Outcome::Read { value: None },
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

    fn outside_model(&self, what: String) -> Outcome {
        let mut unexpected = self.unexpected.lock();
        unexpected.0 += 1;
        unexpected.1.get_or_insert(what);
        Outcome::Unknown
    }
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
}
