//! Datanode CPU time from /proc: user plus system ticks of each datanode
//! process, sampled before and after a run, so a report can say how many CPU
//! seconds the datanodes spent per GB the bench moved.

use super::args::DatanodePids;
use super::report::{CpuReport, GB};
use std::collections::BTreeMap;
use std::path::Path;

/// Clock ticks per second of /proc/PID/stat's times.
fn ticks_per_second() -> f64 {
    match rustix::param::clock_ticks_per_second() {
        0 => 100.0,
        t => t as f64,
    }
}

/// Subcommands of the `tessera` binary.
const ROLES: [&str; 7] = [
    "server", "meta", "datanode", "gateway", "admin", "bench", "probe",
];

/// Whether a NUL-separated command line runs `tessera ... datanode`.
pub fn is_datanode_cmdline(cmdline: &[u8]) -> bool {
    let mut args = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(String::from_utf8_lossy);
    let Some(program) = args.next() else {
        return false;
    };
    let name = program.rsplit('/').next().unwrap_or(&program);
    // The subcommand is the first role word; flags and their values come before it.
    name == "tessera"
        && args
            .find(|a| ROLES.contains(&a.as_ref()))
            .is_some_and(|a| a == "datanode")
}

/// Ids of the processes under `proc_root` running `tessera datanode`.
pub fn find_datanodes(proc_root: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(proc_root.join(pid.to_string()).join("cmdline"))
                .is_ok_and(|c| is_datanode_cmdline(&c))
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// utime + stime, in ticks, from the text of /proc/PID/stat.
pub fn parse_stat_ticks(stat: &str) -> Option<u64> {
    // The command name may hold spaces and parentheses; fields resume after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime and stime are fields 14 and 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// CPU ticks of each process at one moment.
#[derive(Clone, Debug, Default)]
pub struct CpuSample {
    ticks: BTreeMap<u32, u64>,
}

impl CpuSample {
    /// Reads the ticks of `pids`; processes that are gone are left out.
    pub fn take(pids: &[u32]) -> Self {
        let ticks = pids
            .iter()
            .filter_map(|pid| {
                let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                Some((*pid, parse_stat_ticks(&text)?))
            })
            .collect();
        Self { ticks }
    }
}

/// The processes a `--datanode-pids` selection means now.
pub fn resolve(selection: &DatanodePids) -> Vec<u32> {
    match selection {
        DatanodePids::Auto => find_datanodes(Path::new("/proc")),
        DatanodePids::List(pids) => pids.clone(),
    }
}

/// CPU spent between two samples by the processes seen in both, per GB of
/// `bytes` moved.
pub fn cpu_report(before: &CpuSample, after: &CpuSample, bytes: u64) -> CpuReport {
    cpu_report_with(before, after, bytes, ticks_per_second())
}

fn cpu_report_with(before: &CpuSample, after: &CpuSample, bytes: u64, hz: f64) -> CpuReport {
    let mut pids = Vec::new();
    let mut ticks = 0u64;
    for (pid, end) in &after.ticks {
        if let Some(start) = before.ticks.get(pid) {
            pids.push(*pid);
            ticks += end.saturating_sub(*start);
        }
    }
    let cpu_seconds = ticks as f64 / hz;
    CpuReport {
        pids,
        cpu_seconds,
        cpu_seconds_per_gb: (bytes > 0).then(|| cpu_seconds / (bytes as f64 / GB)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_datanode_command_lines() {
        assert!(is_datanode_cmdline(
            b"/x/target/debug/tessera\0datanode\0--meta\0m:1\0"
        ));
        assert!(is_datanode_cmdline(
            b"tessera\0--config\0a.toml\0datanode\0"
        ));
        assert!(!is_datanode_cmdline(b"tessera\0meta\0--data\0datanode\0"));
        assert!(!is_datanode_cmdline(b"/usr/bin/vim\0datanode\0"));
        assert!(!is_datanode_cmdline(b"tessera-datanode-log\0datanode\0"));
        assert!(!is_datanode_cmdline(b""));
    }

    #[test]
    fn finds_datanodes_in_a_proc_tree() {
        let root = tempfile::tempdir().unwrap();
        let add = |pid: &str, cmdline: &[u8]| {
            let dir = root.path().join(pid);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("cmdline"), cmdline).unwrap();
        };
        add("42", b"/bin/tessera\0datanode\0--meta\0m\0");
        add("7", b"/bin/tessera\0meta\0");
        add("9", b"tessera\0datanode\0");
        add("self", b"tessera\0datanode\0");
        assert_eq!(find_datanodes(root.path()), vec![9, 42]);
    }

    #[test]
    fn parses_times_after_a_tricky_command_name() {
        let stat = "1234 (tess (era) x) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 8 0 100 0 0";
        assert_eq!(parse_stat_ticks(stat), Some(300));
        assert_eq!(parse_stat_ticks("garbage"), None);
        let own = std::fs::read_to_string("/proc/self/stat").unwrap();
        assert!(parse_stat_ticks(&own).is_some());
    }

    #[test]
    fn cpu_per_gb_counts_processes_seen_twice() {
        let before = CpuSample {
            ticks: BTreeMap::from([(1, 100), (2, 50)]),
        };
        let after = CpuSample {
            ticks: BTreeMap::from([(1, 300), (3, 999)]),
        };
        let r = cpu_report_with(&before, &after, 2_000_000_000, 100.0);
        assert_eq!(r.pids, vec![1]);
        assert_eq!(r.cpu_seconds, 2.0);
        assert_eq!(r.cpu_seconds_per_gb, Some(1.0));
        assert_eq!(
            cpu_report_with(&before, &after, 0, 100.0).cpu_seconds_per_gb,
            None
        );
    }
}
