//! `tessera bench` against a real cluster of separate processes (meta, five
//! datanodes and the S3 gateway on 127.0.0.1:0): short runs of every
//! workload, checked through their JSON reports.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const ACCESS_KEY: &str = "BENCHACCESSKEY";
const SECRET_KEY: &str = "bench-secret-key";
const ADMIN_TOKEN: &str = "bench-admin-token";
const DATANODES: usize = 5;

fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_tessera")
}

/// One started process, killed (by its own handle) when dropped.
struct Proc {
    child: Child,
    ready: Vec<(String, String)>,
}

impl Proc {
    /// Starts `tessera args...` and waits for its READY line.
    fn start(name: &str, args: &[&str], logs: &Path) -> Self {
        let stderr = std::fs::File::create(logs.join(format!("{name}.log"))).unwrap();
        let mut child = Command::new(binary())
            .args(args)
            .env_remove("TESSERA_CONFIG")
            .env("TESSERA_ROOT_ACCESS_KEY", ACCESS_KEY)
            .env("TESSERA_ROOT_SECRET_KEY", SECRET_KEY)
            .env("TESSERA_ADMIN_TOKEN", ADMIN_TOKEN)
            .env_remove("TESSERA_CREDENTIAL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            // Drain stdout for the life of the process; hand over the READY line.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("READY ") {
                    let _ = tx.send(rest.to_string());
                }
            }
        });
        let line = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                let log = std::fs::read_to_string(logs.join(format!("{name}.log")));
                panic!("{name} printed no READY line: {log:?}");
            }
        };
        let ready = line
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Self { child, ready }
    }

    fn field(&self, key: &str) -> String {
        self.ready
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no {key} in {:?}", self.ready))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `tessera admin credential ARGS...` through meta at `meta`: the credential.
fn mint(meta: &str, args: &[&str]) -> String {
    let out = Command::new(binary())
        .args([
            "admin",
            "--meta",
            meta,
            "--token",
            ADMIN_TOKEN,
            "credential",
        ])
        .args(args)
        .env_remove("TESSERA_CONFIG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "credential {args:?}: {stderr}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

struct Cluster {
    meta: String,
    s3: String,
    datanode_pids: Vec<u32>,
    dir: PathBuf,
    _procs: Vec<Proc>,
    _tmp: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let local = "127.0.0.1:0";
        let meta_dir = dir.join("meta");
        let meta = Proc::start(
            "meta",
            &[
                "meta",
                "--data",
                meta_dir.to_str().unwrap(),
                "--listen",
                local,
                "--ops-listen",
                local,
                "--block-size",
                "1MiB",
            ],
            &dir,
        );
        let meta_addr = meta.field("meta");
        let mut procs = vec![meta];
        // Each process gets its own credential, minted through meta.
        let mut datanode_pids = Vec::new();
        for i in 0..DATANODES {
            let data = dir.join(format!("dn{i}"));
            let credential = dir.join(format!("dn{i}.credential"));
            std::fs::write(&credential, mint(&meta_addr, &["datanode"])).unwrap();
            let dn = Proc::start(
                &format!("dn{i}"),
                &[
                    "datanode",
                    "--meta",
                    &meta_addr,
                    "--data",
                    data.to_str().unwrap(),
                    "--listen",
                    local,
                    "--ops-listen",
                    local,
                    "--fsync",
                    "false",
                    "--heartbeat-interval",
                    "200ms",
                    "--credential-file",
                    credential.to_str().unwrap(),
                ],
                &dir,
            );
            datanode_pids.push(dn.child.id());
            procs.push(dn);
        }
        let credential = dir.join("gateway.credential");
        std::fs::write(&credential, mint(&meta_addr, &["gateway", "gw1"])).unwrap();
        let gateway = Proc::start(
            "gateway",
            &[
                "gateway",
                "--meta",
                &meta_addr,
                "--listen",
                local,
                "--ops-listen",
                local,
                "--block-size",
                "1MiB",
                "--credential-file",
                credential.to_str().unwrap(),
            ],
            &dir,
        );
        let s3 = gateway.field("s3");
        procs.push(gateway);
        let cluster = Self {
            meta: meta_addr,
            s3,
            datanode_pids,
            dir,
            _procs: procs,
            _tmp: tmp,
        };
        cluster.wait_healthy();
        cluster
    }

    fn wait_healthy(&self) {
        for _ in 0..300 {
            let out = Command::new(binary())
                .args([
                    "admin",
                    "--meta",
                    &self.meta,
                    "--token",
                    ADMIN_TOKEN,
                    "--json",
                    "status",
                ])
                .output()
                .unwrap();
            if let Ok(status) = serde_json::from_slice::<Value>(&out.stdout) {
                let healthy = status["datanodes"]
                    .as_array()
                    .map_or(0, |d| d.iter().filter(|n| n["state"] == "healthy").count());
                if healthy >= DATANODES {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("{DATANODES} datanodes never became healthy");
    }

    /// Runs `tessera bench args...` and returns its JSON report.
    fn bench(&self, args: &[&str]) -> Value {
        let out = Command::new(binary())
            .arg("bench")
            .args(args)
            .arg("--json")
            .env_remove("TESSERA_CONFIG")
            .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
            .env(
                "TESSERA_CREDENTIAL",
                mint(&self.meta, &["gateway", "bench"]),
            )
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "bench {args:?} failed: {stderr}");
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "bench {args:?} printed no JSON ({e}): {}\n{stderr}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }
}

fn assert_clean_run(report: &Value, what: &str) {
    assert!(
        report["ops"].as_u64().unwrap() > 0,
        "{what}: no ops in {report}"
    );
    assert_eq!(report["errors"], 0, "{what}: errors in {report}");
    for w in report["workloads"].as_array().unwrap() {
        assert!(
            w["ops"].as_u64().unwrap() > 0,
            "{what}: idle workload in {report}"
        );
        assert!(
            w["latency_ms"]["p99"].as_f64().unwrap() > 0.0,
            "{what}: {w}"
        );
    }
}

#[test]
fn bench_workloads_against_a_process_cluster() {
    let cluster = Cluster::start();
    let svg = cluster.dir.join("pread.svg");
    let pids: Vec<String> = cluster.datanode_pids.iter().map(u32::to_string).collect();
    let pids = pids.join(",");

    // Positioned reads of one EC key (two block groups) beside a sequential reader.
    let pread = cluster.bench(&[
        "pread",
        "--meta",
        &cluster.meta,
        "--key",
        "pread-4m",
        "--size",
        "4MiB",
        "--block-size",
        "1MiB",
        "--replication",
        "rs-3-2-1024k",
        "--threads",
        "2",
        "--read-size",
        "64KiB",
        "--seq-readers",
        "1",
        "--seq-read-size",
        "256KiB",
        "--duration",
        "2s",
        "--plot",
        svg.to_str().unwrap(),
        "--datanode-pids",
        &pids,
        "--verify",
    ]);
    assert_clean_run(&pread, "pread");
    assert_eq!(pread["settings"]["verify"], true);
    assert_eq!(pread["workloads"][0]["name"], "positioned");
    assert_eq!(pread["workloads"][1]["name"], "sequential");
    assert_eq!(pread["settings"]["size"], 4 << 20);
    let cpu = &pread["datanode_cpu"];
    assert_eq!(cpu["pids"].as_array().unwrap().len(), DATANODES, "{cpu}");
    assert!(cpu["cpu_seconds_per_gb"].is_number(), "{cpu}");
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(
        svg.contains("<svg"),
        "not an SVG: {}",
        &svg[..svg.len().min(200)]
    );

    // The same key through the gateway, as signed ranged GETs.
    let pread_s3 = cluster.bench(&[
        "pread",
        "--via",
        "s3",
        "--endpoint",
        &cluster.s3,
        "--key",
        "pread-4m",
        "--size",
        "4MiB",
        "--threads",
        "2",
        "--seq-readers",
        "1",
        "--duration",
        "1s",
        "--verify",
    ]);
    assert_clean_run(&pread_s3, "pread via s3");
    assert_eq!(pread_s3["settings"]["verify"], true);
    assert_eq!(pread_s3["settings"]["size"], 4 << 20);

    let get = cluster.bench(&[
        "get",
        "--endpoint",
        &cluster.s3,
        "--clients",
        "2",
        "--object-size",
        "64KiB",
        "--objects",
        "3",
        "--duration",
        "1s",
        "--verify",
    ]);
    assert_clean_run(&get, "get");
    assert_eq!(
        get["bytes"].as_u64().unwrap(),
        get["ops"].as_u64().unwrap() * 65536
    );

    let put = cluster.bench(&[
        "put",
        "--meta",
        &cluster.meta,
        "--block-size",
        "1MiB",
        "--writers",
        "2",
        "--key-size",
        "1MiB",
        "--count",
        "4",
    ]);
    assert_clean_run(&put, "put");
    assert_eq!(put["ops"], 4);
    assert_eq!(put["bytes"], 4 << 20);

    let put_s3 = cluster.bench(&[
        "put",
        "--via",
        "s3",
        "--endpoint",
        &cluster.s3,
        "--writers",
        "2",
        "--key-size",
        "256KiB",
        "--count",
        "3",
    ]);
    assert_clean_run(&put_s3, "put via s3");
    assert_eq!(put_s3["ops"], 3);
}
