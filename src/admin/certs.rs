//! `tessera admin certs`: the cluster CA and the certificates of its
//! processes for mutual TLS on the internal links, written offline: to one
//! folder, or with `--node-dir` each process's files to a folder of its own
//! (what docker-compose mounts into each container). Run again with more
//! `--node`s, it reuses the CA and leaves files that exist as they are
//! (delete a node's pair to renew it).

use super::write_new_file;
use anyhow::{Context, Result};
use clap::Args;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tls::certs::Authority;

/// `n` days, or an error naming `flag` when that is beyond any date.
fn days(n: u64, flag: &str) -> Result<Duration> {
    n.checked_mul(86_400)
        .map(Duration::from_secs)
        .with_context(|| format!("{flag} {n} is too many days"))
}

/// Flags of `tessera admin certs`.
#[derive(Args, Debug)]
pub struct CertsArgs {
    /// Folder for ca.pem, ca.key and each node's NAME.pem and NAME.key
    /// (created 0700; keys are written 0600).
    #[arg(long)]
    pub dir: PathBuf,
    /// Write each node's files to NODE_DIR/NAME/ instead, as ca.pem,
    /// node.pem and node.key: all a process needs, and nothing of another's.
    #[arg(long)]
    pub node_dir: Option<PathBuf>,
    /// `NAME=HOST[,HOST...]`: a certificate for process NAME, dialled at
    /// these DNS names or IP addresses; repeatable. Clients that only dial
    /// (admin, bench) still need one: any host will do.
    #[arg(long = "node", value_name = "NAME=HOSTS")]
    pub nodes: Vec<String>,
    /// Days node certificates stay valid.
    #[arg(long, default_value_t = 365)]
    pub days: u64,
    /// Days a new CA stays valid.
    #[arg(long, default_value_t = 3650)]
    pub ca_days: u64,
}

/// A node named on the command line.
struct Node {
    name: String,
    hosts: Vec<String>,
}

fn parse_node(text: &str) -> Result<Node> {
    let (name, hosts) = text
        .split_once('=')
        .with_context(|| format!("--node {text:?}: expected NAME=HOST[,HOST...]"))?;
    let name_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    anyhow::ensure!(
        name_ok && name != "ca",
        "--node {text:?}: NAME must be letters, digits, '-' or '_', and not \"ca\""
    );
    let hosts: Vec<String> = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(String::from)
        .collect();
    anyhow::ensure!(!hosts.is_empty(), "--node {text:?}: no host");
    Ok(Node {
        name: name.to_string(),
        hosts,
    })
}

/// The CA in `dir`, created when it has none.
fn authority(dir: &Path, valid_for: Duration) -> Result<(Authority, bool)> {
    let (cert, key) = (dir.join("ca.pem"), dir.join("ca.key"));
    if cert.exists() || key.exists() {
        let read = |p: &Path| {
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))
        };
        let ca = Authority::load(&read(&cert)?, &read(&key)?)
            .with_context(|| format!("loading the CA in {}", dir.display()))?;
        return Ok((ca, false));
    }
    let ca = Authority::create("Tessera cluster CA", valid_for)?;
    write_new_file(&key, ca.key_pem().as_bytes(), 0o600)?;
    write_new_file(&cert, ca.cert_pem().as_bytes(), 0o644)?;
    Ok((ca, true))
}

/// Writes the CA (unless there) and each node's certificate and key (unless
/// there); returns what was written.
pub fn run(args: &CertsArgs) -> Result<Value> {
    let nodes = args
        .nodes
        .iter()
        .map(|n| parse_node(n))
        .collect::<Result<Vec<_>>>()?;
    proto::durable::create_private_dir(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let (node_validity, ca_validity) =
        (days(args.days, "--days")?, days(args.ca_days, "--ca-days")?);
    let (ca, ca_created) = authority(&args.dir, ca_validity)?;
    let mut written = Vec::new();
    for node in &nodes {
        let (cert, key) = match &args.node_dir {
            None => (
                args.dir.join(format!("{}.pem", node.name)),
                args.dir.join(format!("{}.key", node.name)),
            ),
            Some(node_dir) => {
                let own = node_dir.join(&node.name);
                proto::durable::create_private_dir(&own)
                    .with_context(|| format!("creating {}", own.display()))?;
                write_new_file(&own.join("ca.pem"), ca.cert_pem().as_bytes(), 0o644)?;
                (own.join("node.pem"), own.join("node.key"))
            }
        };
        if cert.exists() || key.exists() {
            continue;
        }
        let issued = ca
            .issue(&node.name, &node.hosts, node_validity)
            .with_context(|| format!("issuing {}'s certificate", node.name))?;
        write_new_file(&key, issued.key_pem.as_bytes(), 0o600)?;
        write_new_file(&cert, issued.cert_pem.as_bytes(), 0o644)?;
        written.push(json!({"node": node.name, "hosts": node.hosts, "cert": cert, "key": key}));
    }
    Ok(json!({
        "ca": args.dir.join("ca.pem"),
        "ca_created": ca_created,
        "written": written,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_are_named_with_their_hosts() {
        let node = parse_node("dn1=dn1, 10.0.0.5").unwrap();
        assert_eq!(node.name, "dn1");
        assert_eq!(node.hosts, ["dn1", "10.0.0.5"]);
        for bad in ["dn1", "=h", "dn1=", "ca=h", "../x=h"] {
            assert!(parse_node(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_second_run_keeps_the_ca_and_existing_pairs() {
        let dir = tempfile::tempdir().unwrap();
        let args = |nodes: &[&str]| CertsArgs {
            dir: dir.path().join("certs"),
            node_dir: None,
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            days: 1,
            ca_days: 1,
        };
        let first = run(&args(&["meta=127.0.0.1"])).unwrap();
        assert_eq!(first["ca_created"], true);
        let ca = std::fs::read(dir.path().join("certs/ca.pem")).unwrap();
        let meta = std::fs::read(dir.path().join("certs/meta.pem")).unwrap();
        let second = run(&args(&["meta=127.0.0.1", "dn1=localhost"])).unwrap();
        assert_eq!(second["ca_created"], false);
        assert_eq!(second["written"].as_array().unwrap().len(), 1);
        assert_eq!(std::fs::read(dir.path().join("certs/ca.pem")).unwrap(), ca);
        assert_eq!(
            std::fs::read(dir.path().join("certs/meta.pem")).unwrap(),
            meta
        );
        use std::os::unix::fs::PermissionsExt;
        for key in ["ca.key", "meta.key", "dn1.key"] {
            let mode = std::fs::metadata(dir.path().join("certs").join(key))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{key}");
        }
    }

    #[test]
    fn days_beyond_any_date_are_refused_not_wrapped() {
        let dir = tempfile::tempdir().unwrap();
        for (days, ca_days) in [(u64::MAX, 1), (1, (1 << 32) + 1), (1, 1_000_000_000)] {
            let args = CertsArgs {
                dir: dir.path().join("certs"),
                node_dir: None,
                nodes: vec!["dn1=dn1".into()],
                days,
                ca_days,
            };
            assert!(run(&args).is_err(), "--days {days} --ca-days {ca_days}");
        }
        assert!(!dir.path().join("certs/dn1.pem").exists());
    }

    #[test]
    fn node_dirs_hold_one_process_each() {
        let dir = tempfile::tempdir().unwrap();
        let args = CertsArgs {
            dir: dir.path().join("ca"),
            node_dir: Some(dir.path().join("nodes")),
            nodes: vec!["dn1=dn1".into(), "meta=meta,127.0.0.1".into()],
            days: 1,
            ca_days: 1,
        };
        run(&args).unwrap();
        let ca = std::fs::read(dir.path().join("ca/ca.pem")).unwrap();
        for node in ["dn1", "meta"] {
            let own = dir.path().join("nodes").join(node);
            let mut names: Vec<_> = std::fs::read_dir(&own)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            assert_eq!(names, ["ca.pem", "node.key", "node.pem"], "{node}");
            assert_eq!(std::fs::read(own.join("ca.pem")).unwrap(), ca);
            let files = tls::ClusterTlsFiles {
                ca: own.join("ca.pem"),
                cert: own.join("node.pem"),
                key: own.join("node.key"),
            };
            tls::ClusterTls::load(&files).unwrap();
        }
        assert!(!dir.path().join("nodes/dn1/ca.key").exists());
    }
}
