//! How every part of Tessera names and describes its metrics: each crate
//! keeps one table of [`Metric`]s, records them by name where they happen,
//! and every process registers all the tables at start ([`describe`]), so
//! that /metrics gives each family its HELP text.

/// What kind of Prometheus family a metric is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only ever goes up (name ends in `_total`).
    Counter,
    /// Goes up and down.
    Gauge,
    /// A distribution of observations (seconds, bytes).
    Histogram,
}

/// One metric: its name, its kind and what it counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metric {
    /// The family's name, `tessera_...`.
    pub name: &'static str,
    /// Its kind.
    pub kind: Kind,
    /// What it counts, as /metrics shows it after `# HELP`.
    pub help: &'static str,
}

impl Metric {
    /// A counter.
    pub const fn counter(name: &'static str, help: &'static str) -> Self {
        Self {
            name,
            kind: Kind::Counter,
            help,
        }
    }

    /// A gauge.
    pub const fn gauge(name: &'static str, help: &'static str) -> Self {
        Self {
            name,
            kind: Kind::Gauge,
            help,
        }
    }

    /// A histogram.
    pub const fn histogram(name: &'static str, help: &'static str) -> Self {
        Self {
            name,
            kind: Kind::Histogram,
            help,
        }
    }
}

/// Registers the help text of every metric in `tables` with the installed
/// recorder.
pub fn describe(tables: &[&[Metric]]) {
    for metric in tables.iter().flat_map(|table| table.iter()) {
        match metric.kind {
            Kind::Counter => metrics::describe_counter!(metric.name, metric.help),
            Kind::Gauge => metrics::describe_gauge!(metric.name, metric.help),
            Kind::Histogram => metrics::describe_histogram!(metric.name, metric.help),
        }
    }
}

/// What is wrong with a table of metrics: two with one name, a name not
/// under `tessera_`, a counter not ending in `_total` (or another kind
/// that does), an empty help text. Each crate's tests run it on its table.
pub fn problems(table: &[Metric]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for metric in table {
        let name = metric.name;
        if !seen.insert(name) {
            problems.push(format!("{name} is listed twice"));
        }
        if !name.starts_with("tessera_") {
            problems.push(format!("{name} is not under tessera_"));
        }
        if (metric.kind == Kind::Counter) != name.ends_with("_total") {
            problems.push(format!("{name}: only counters end in _total"));
        }
        if metric.help.trim().is_empty() {
            problems.push(format!("{name} has no help text"));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_table_is_told_apart() {
        let good = [
            Metric::counter("tessera_x_total", "x"),
            Metric::gauge("tessera_y", "y"),
        ];
        assert!(problems(&good).is_empty());
        let bad = [
            Metric::counter("tessera_x", "x"),
            Metric::gauge("tessera_x", ""),
            Metric::histogram("other_seconds", "z"),
        ];
        assert_eq!(problems(&bad).len(), 4, "{:?}", problems(&bad));
    }
}
