//! Collection configuration files as every command reads them: `crawlfleet config check`,
//! `up --config`, `node --config` and `multinode --config` all go through [`load`], so a file
//! one of them refuses is refused by all with the same messages (docs/collection-config.md
//! "Checking a configuration").

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crawlfleet_core::config::{check_xml, schema, Finding};
use crawlfleet_core::marshal::Value;

/// Arguments of `crawlfleet config`.
#[derive(Debug, clap::Args)]
pub struct ConfigArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ConfigCommand,
}

/// The subcommands of `crawlfleet config`.
#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Check collection configuration files against the full schema (docs/collection-config.md):
    /// unknown elements, attributes and settings (with the closest known name), values of the
    /// wrong type or out of range, start URIs that are not absolute http(s) URIs, seed files
    /// that cannot be read. Prints each problem with its line and column; exits 1 on any.
    Check {
        /// The XML files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

/// Runs `crawlfleet config`.
pub fn run(args: &ConfigArgs) -> Result<ExitCode, String> {
    match &args.command {
        ConfigCommand::Check { files } => {
            let mut bad = 0;
            for f in files {
                match load(f) {
                    Ok(specs) => {
                        let names: Vec<&str> = specs.iter().map(|(n, _)| n.as_str()).collect();
                        println!(
                            "{}: ok ({} collection{}: {})",
                            f.display(),
                            names.len(),
                            if names.len() == 1 { "" } else { "s" },
                            names.join(", ")
                        );
                    }
                    Err(e) => {
                        bad += 1;
                        eprintln!("{e}");
                    }
                }
            }
            Ok(match bad {
                0 => ExitCode::SUCCESS,
                _ => ExitCode::FAILURE,
            })
        }
    }
}

/// Reads, checks and loads a configuration file: (name, dict) of every DomainSpecification,
/// the URIs of each `start_uri_files` file (relative to the working directory) added to its
/// `start_uris`. `Err` holds every problem, one per line, each prefixed with the file's name.
pub fn load(path: &Path) -> Result<Vec<(String, Value<'static>)>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read the configuration: {e}", path.display()))?;
    let shown = |findings: Vec<Finding>| {
        let lines: Vec<String> = findings
            .iter()
            .map(|f| format!("{}: {f}", path.display()))
            .collect();
        lines.join("\n")
    };
    let mut specs = check_xml(&text).map_err(shown)?;
    let mut findings = Vec::new();
    for (name, dict) in &mut specs {
        if let Err(message) = add_seed_files(dict) {
            findings.push(Finding {
                pos: None,
                collection: Some(name.clone()),
                message,
            });
        }
    }
    match findings.is_empty() {
        true => Ok(specs),
        false => Err(shown(findings)),
    }
}

/// Reads every configuration file: the collections of all, in order.
pub fn load_all(files: &[PathBuf]) -> Result<Vec<(String, Value<'static>)>, String> {
    let mut out = Vec::new();
    for f in files {
        out.extend(load(f)?);
    }
    Ok(out)
}

/// Adds the URIs of the dict's `start_uri_files` (one per line; blank lines and lines
/// starting with `#` skipped) to its `start_uris`, each once; and each SubDomain's to its own.
fn add_seed_files(dict: &mut Value<'static>) -> Result<(), String> {
    if let Value::Dict(pairs) = dict {
        for (k, subs) in pairs.iter_mut() {
            if k.as_bytes() != Some(b"subdomains") {
                continue;
            }
            if let Value::Dict(subs) = subs {
                for (name, sub) in subs.iter_mut() {
                    add_own_seed_files(sub).map_err(|e| {
                        let name = name.as_bytes().map(String::from_utf8_lossy);
                        format!("SubDomain {:?}: {e}", name.unwrap_or_default())
                    })?;
                }
            }
        }
    }
    add_own_seed_files(dict)
}

/// [`add_seed_files`] of one dict, without its SubDomains.
fn add_own_seed_files(dict: &mut Value<'static>) -> Result<(), String> {
    let files: Vec<String> = match dict.get(b"start_uri_files").and_then(Value::as_list) {
        Some(l) => l
            .iter()
            .filter_map(|v| v.as_bytes())
            .map(|b| String::from_utf8_lossy(b).trim().to_string())
            .collect(),
        None => return Ok(()),
    };
    let mut uris: Vec<Vec<u8>> = dict
        .get(b"start_uris")
        .and_then(Value::as_list)
        .map(|l| {
            l.iter()
                .filter_map(|v| v.as_bytes())
                .map(<[u8]>::to_vec)
                .collect()
        })
        .unwrap_or_default();
    // A seed file may hold very many URIs: each is looked up in a set, not in the list.
    let mut seen: std::collections::HashSet<Vec<u8>> = uris.iter().cloned().collect();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| {
            format!("setting \"start_uri_files\": cannot read the seed file {f:?}: {e}")
        })?;
        for (n, line) in text.lines().enumerate() {
            let uri = line.trim();
            if uri.is_empty() || uri.starts_with('#') {
                continue;
            }
            schema::start_uri(uri).map_err(|e| format!("seed file {f:?}, line {}: {e}", n + 1))?;
            if seen.insert(uri.as_bytes().to_vec()) {
                uris.push(uri.as_bytes().to_vec());
            }
        }
    }
    let list = Value::list(uris.into_iter().map(Value::owned_bytes).collect());
    if let Value::Dict(pairs) = dict {
        match pairs
            .iter_mut()
            .find(|(k, _)| k.as_bytes() == Some(b"start_uris"))
        {
            Some((_, v)) => *v = list,
            None => pairs.push((Value::owned_bytes(b"start_uris".to_vec()), list)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A SubDomain's start URIs and seed files (docs/collection-config.md, "SubDomain") are
    /// start URIs of the collection: the node and multinode schedulers queue them with the
    /// collection's own.
    #[test]
    fn subdomain_start_uris_and_seed_files_are_start_uris() {
        let dir = tempfile::tempdir().unwrap();
        let seeds = dir.path().join("docs-seeds.txt");
        std::fs::write(
            &seeds,
            "# docs\nhttp://127.0.0.1:8082/docs/a.html\n\nhttp://127.0.0.1:8081/\n",
        )
        .unwrap();
        let xml = format!(
            r#"<CrawlerConfig><DomainSpecification name="c">
  <attrib name="start_uris" type="list-string"><member>http://127.0.0.1:8081/</member></attrib>
  <SubDomain name="docs">
    <attrib name="include_uris" type="list-string"><member>http://127.0.0.1:8082/docs/</member></attrib>
    <attrib name="start_uris" type="list-string"><member>http://127.0.0.1:8082/docs/</member></attrib>
    <attrib name="start_uri_files" type="list-string"><member>{}</member></attrib>
  </SubDomain>
</DomainSpecification></CrawlerConfig>"#,
            seeds.display()
        );
        let path = dir.path().join("c.xml");
        std::fs::write(&path, xml).unwrap();
        let specs = load(&path).unwrap();
        let uris: Vec<String> = crawlfleet_core::sched::start_uris(&specs[0].1)
            .into_iter()
            .map(|u| String::from_utf8(u).unwrap())
            .collect();
        assert_eq!(
            uris,
            [
                "http://127.0.0.1:8081/",
                "http://127.0.0.1:8082/docs/",
                "http://127.0.0.1:8082/docs/a.html",
            ]
        );
        // A SubDomain's missing seed file is an error naming it.
        std::fs::remove_file(&seeds).unwrap();
        let e = load(&path).unwrap_err();
        assert!(
            e.contains("SubDomain \"docs\"") && e.contains("seed file"),
            "{e}"
        );
    }
}
