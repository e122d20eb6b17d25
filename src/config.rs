//! `--config FILE.toml`: every key of the file is a flag of the role being
//! started, spelled with `_` or `-`. The file only fills in what neither a flag
//! nor a `TESSERA_*` variable gives, so the order of precedence is
//! flag > environment > file > built-in default.
//!
//! It works by exporting each file value as the flag's `TESSERA_*` variable
//! before clap parses the command line, so that clap's own `env` support
//! applies one rule for every setting.

use anyhow::{bail, Context, Result};
use std::ffi::OsString;
use std::path::PathBuf;

/// Name of the environment variable clap reads for the flag `--long-name`.
pub fn env_name(long: &str) -> String {
    format!("TESSERA_{}", long.replace('-', "_").to_ascii_uppercase())
}

/// Finds `--config PATH` (or `--config=PATH`, or TESSERA_CONFIG) in the raw arguments.
fn config_path(args: &[OsString]) -> Option<PathBuf> {
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let arg = arg.to_string_lossy();
        if arg == "--config" {
            return iter.next().map(PathBuf::from);
        }
        if let Some(path) = arg.strip_prefix("--config=") {
            return Some(PathBuf::from(path));
        }
    }
    std::env::var_os("TESSERA_CONFIG").map(PathBuf::from)
}

/// Exports the settings of the config file named on the command line as
/// `TESSERA_*` variables, refusing keys that are not flags of `subcommand`.
/// Must run before any thread starts (it changes the process environment).
pub fn apply_config_file(args: &[OsString], command: &clap::Command) -> Result<()> {
    let Some(path) = config_path(args) else {
        return Ok(());
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading config file {}", path.display()))?;
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("parsing config file {}", path.display()))?;
    let subcommand = args.iter().skip(1).find_map(|a| {
        command
            .find_subcommand(a.to_string_lossy().as_ref())
            .cloned()
    });
    let Some(subcommand) = subcommand else {
        bail!("--config needs a role: tessera <server|meta|datanode|gateway> --config FILE");
    };
    let known: Vec<String> = subcommand
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect();
    for (key, value) in table {
        let long = key.replace('_', "-");
        if !known.contains(&long) || long == "config" {
            bail!(
                "config file {}: unknown setting {key:?} for `tessera {}` (known: {})",
                path.display(),
                subcommand.get_name(),
                known.join(", ")
            );
        }
        let value = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            other => bail!(
                "config file {}: {key} must be a scalar, not {other}",
                path.display()
            ),
        };
        let var = env_name(&long);
        if std::env::var_os(&var).is_none() {
            // Edition 2021: set_var is safe; we are still single-threaded here.
            std::env::set_var(var, value);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_names_follow_flags() {
        assert_eq!(env_name("meta-listen"), "TESSERA_META_LISTEN");
        assert_eq!(env_name("data"), "TESSERA_DATA");
    }

    #[test]
    fn finds_config_in_both_spellings() {
        let args: Vec<OsString> = ["tessera", "server", "--config", "a.toml"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(config_path(&args), Some(PathBuf::from("a.toml")));
        let args: Vec<OsString> = ["tessera", "server", "--config=b.toml"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(config_path(&args), Some(PathBuf::from("b.toml")));
    }

    #[test]
    fn file_fills_what_flags_and_env_do_not() {
        use clap::CommandFactory;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tessera.toml");
        std::fs::write(
            &file,
            "bytes_per_checksum = \"1MiB\"\nregion = \"eu-west-1\"\n",
        )
        .unwrap();
        let args: Vec<OsString> = ["tessera", "--config", file.to_str().unwrap(), "gateway"]
            .iter()
            .map(OsString::from)
            .collect();
        apply_config_file(&args, &crate::Cli::command()).unwrap();
        assert_eq!(std::env::var("TESSERA_BYTES_PER_CHECKSUM").unwrap(), "1MiB");
        assert_eq!(std::env::var("TESSERA_REGION").unwrap(), "eu-west-1");

        std::fs::write(&file, "no_such_setting = 1\n").unwrap();
        let err = apply_config_file(&args, &crate::Cli::command()).unwrap_err();
        assert!(err.to_string().contains("unknown setting"), "{err}");
    }
}
