//! deploy/ as an operator installs it (deploy/README.md): the systemd units pass only flags that
//! `crawlfleet ROLE --help` lists, every host's environment file gives its units every setting
//! they need and nothing they do not read, the command line each unit runs on each host is one
//! crawlfleet accepts, the collection passes `crawlfleet config check`, and `systemd-analyze
//! verify` and `systemd-analyze security` pass the units (skipped without systemd-analyze, which
//! .ci/run installs).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::util::{checkout_path, temp_dir};

/// Where the units say the binary is; the tests put the one they built there instead.
const INSTALLED_BIN: &str = "/usr/local/bin/crawlfleet";

/// Settings every unit must carry (the hardening deploy/README.md describes).
const HARDENING: &[&str] = &[
    "User=crawlfleet",
    "Restart=on-failure",
    "LimitNOFILE=65536",
    "NoNewPrivileges=yes",
    "ProtectSystem=strict",
    "ProtectHome=yes",
    "PrivateTmp=yes",
    "PrivateDevices=yes",
    "CapabilityBoundingSet=",
    "SystemCallFilter=@system-service",
];

/// The highest `systemd-analyze security` exposure a unit may have, in tenths ("OK" is below 2.0
/// on its 0-10 scale; the units measure 1.2).
const MAX_EXPOSURE: u32 = 20;

fn crawlfleet(args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args(args)
        .output()
        .expect("the crawlfleet binary runs")
}

fn show(what: &str, out: &Output) -> String {
    format!(
        "{what}\nstatus: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// One unit of deploy/systemd.
struct Unit {
    path: PathBuf,
    /// The role, from the file name `crawlfleet-ROLE.service`.
    role: String,
    /// `Key=Value` lines, in order.
    settings: Vec<(String, String)>,
}

impl Unit {
    fn read(path: &Path) -> Unit {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let role = name
            .strip_prefix("crawlfleet-")
            .and_then(|n| n.strip_suffix(".service"))
            .unwrap_or_else(|| panic!("{name}: not crawlfleet-ROLE.service"))
            .to_string();
        let text = std::fs::read_to_string(path).unwrap();
        let settings = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('['))
            .map(|l| {
                let (k, v) = l.split_once('=').unwrap_or_else(|| panic!("{name}: {l}"));
                (k.to_string(), v.to_string())
            })
            .collect();
        Unit {
            path: path.to_path_buf(),
            role,
            settings,
        }
    }

    fn get(&self, key: &str) -> Vec<&str> {
        self.settings
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// ExecStart's words: the binary, the role, then flags, values and `$VAR` / `${VAR}`.
    fn exec(&self) -> Vec<&str> {
        let exec = self.get("ExecStart");
        assert_eq!(exec.len(), 1, "{}: one ExecStart", self.path.display());
        assert!(
            !exec[0].contains(['"', '\'', '\\']),
            "no quoting: {}",
            exec[0]
        );
        exec[0].split_whitespace().collect()
    }

    /// The defaults the unit's Environment= lines give.
    fn defaults(&self) -> BTreeMap<String, String> {
        self.get("Environment")
            .iter()
            .flat_map(|v| v.split_whitespace())
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                (k.to_string(), v.to_string())
            })
            .collect()
    }

    /// The variables ExecStart reads: (name, braced). A braced one is one argument and must not
    /// be empty; a bare `$VAR` is split at white space (and may be empty).
    fn variables(&self) -> Vec<(String, bool)> {
        self.exec()
            .iter()
            .filter_map(|w| {
                if let Some(v) = w.strip_prefix("${") {
                    Some((v.strip_suffix('}').unwrap().to_string(), true))
                } else {
                    w.strip_prefix('$').map(|v| (v.to_string(), false))
                }
            })
            .collect()
    }

    /// The command line the unit runs with `env` (the host's file over the unit's defaults),
    /// `%S` (the state directories' root) as `state`, without the binary.
    fn command_line(&self, env: &BTreeMap<String, String>, state: &Path) -> Vec<String> {
        let mut vars = self.defaults();
        vars.extend(env.clone());
        let mut out = Vec::new();
        for w in &self.exec()[1..] {
            if let Some(v) = w.strip_prefix("${") {
                let name = v.strip_suffix('}').unwrap();
                let value = vars
                    .get(name)
                    .unwrap_or_else(|| panic!("{name} is not set"));
                assert!(!value.is_empty(), "{name} is empty");
                out.push(value.clone());
            } else if let Some(name) = w.strip_prefix('$') {
                let value = vars
                    .get(name)
                    .unwrap_or_else(|| panic!("{name} is not set"));
                out.extend(value.split_whitespace().map(String::from));
            } else {
                assert!(!w.contains('$'), "{w}: a variable inside a word");
                out.push(w.replace("%S", &state.to_string_lossy()));
            }
        }
        out
    }
}

fn units() -> Vec<Unit> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(checkout_path("deploy/systemd"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    paths.iter().map(|p| Unit::read(p)).collect()
}

/// A host's environment file: KEY=value lines (a value may be in double quotes).
fn env_file(path: &Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l
                .split_once('=')
                .unwrap_or_else(|| panic!("{}: {l}", path.display()));
            assert!(
                !k.contains(' ') && !v.starts_with(' '),
                "{l}: no spaces around ="
            );
            let v = v
                .strip_prefix('"')
                .map(|v| v.strip_suffix('"').unwrap_or_else(|| panic!("{l}")))
                .unwrap_or(v);
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn hosts() -> Vec<(String, BTreeMap<String, String>)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(checkout_path("deploy/env"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| {
            (
                p.file_stem().unwrap().to_string_lossy().into_owned(),
                env_file(p),
            )
        })
        .collect()
}

/// The long flags `crawlfleet ROLE --help` lists.
fn help_flags(role: &str) -> BTreeSet<String> {
    let out = crawlfleet(&[role.to_string(), "--help".into()]);
    assert!(out.status.success(), "{}", show(role, &out));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut flags = BTreeSet::new();
    for (i, _) in text.match_indices("--") {
        let name: String = text[i + 2..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if !name.is_empty() {
            flags.insert(format!("--{name}"));
        }
    }
    flags
}

#[test]
fn every_flag_of_the_units_and_hosts_is_one_the_role_has() {
    let units = units();
    let roles: BTreeSet<&str> = units.iter().map(|u| u.role.as_str()).collect();
    // A unit for every role that runs as a service.
    for role in [
        "multinode",
        "node",
        "dupserver",
        "dupreplica",
        "linkstore",
        "nameserver",
        "distributor",
        "rup-server",
    ] {
        assert!(roles.contains(role), "no unit for {role}");
    }
    let state = temp_dir("deploy-state");
    for u in &units {
        let exec = u.exec();
        assert_eq!(exec[0], INSTALLED_BIN, "{}", u.path.display());
        assert_eq!(exec[1], u.role, "{}: runs its own role", u.path.display());
        for h in HARDENING {
            let (k, v) = h.split_once('=').unwrap();
            assert!(u.get(k).contains(&v), "{}: no {h}", u.path.display());
        }
        assert_eq!(
            u.get("StateDirectory"),
            [format!("crawlfleet/{}", u.role)],
            "{}",
            u.path.display()
        );
        assert!(
            exec.contains(&format!("%S/crawlfleet/{}", u.role).as_str()),
            "{}: its data directory is its StateDirectory",
            u.path.display()
        );
        // The flags written in the unit, with its defaults alone.
        let flags = help_flags(&u.role);
        for w in exec.iter().filter(|w| w.starts_with("--")) {
            assert!(
                flags.contains(*w),
                "{}: `crawlfleet {} --help` has no {w}",
                u.path.display(),
                u.role
            );
        }
    }

    let hosts = hosts();
    assert!(hosts.len() >= 3, "the three hosts' environment files");
    for (host, env) in &hosts {
        let host_roles = env
            .get("CRAWLFLEET_ROLES")
            .unwrap_or_else(|| panic!("{host}: no CRAWLFLEET_ROLES"));
        let mut read: BTreeSet<String> = ["CRAWLFLEET_ROLES", "RUST_LOG"].map(String::from).into();
        for role in host_roles.split_whitespace() {
            let u = units
                .iter()
                .find(|u| u.role == role)
                .unwrap_or_else(|| panic!("{host}: no unit for role {role}"));
            let defaults = u.defaults();
            for (var, braced) in u.variables() {
                read.insert(var.clone());
                assert!(
                    env.contains_key(&var)
                        || (!braced && defaults.contains_key(&var))
                        || (braced && defaults.get(&var).is_some_and(|v| !v.is_empty())),
                    "{host}: {role} needs {var}"
                );
            }
            // The command line as the unit runs it on this host: every flag is the role's, and
            // crawlfleet parses every value (clap checks them before it prints the help).
            let line = u.command_line(env, state.path());
            let flags = help_flags(role);
            for w in line.iter().filter(|w| w.starts_with("--")) {
                assert!(
                    flags.contains(w),
                    "{host}: `crawlfleet {role} --help` has no {w}"
                );
            }
            let mut with_help = line.clone();
            with_help.push("--help".into());
            let out = crawlfleet(&with_help);
            assert!(
                out.status.success(),
                "{}",
                show(&format!("{host}: crawlfleet {}", line.join(" ")), &out)
            );
        }
        for key in env.keys() {
            assert!(
                read.contains(key),
                "{host}: no unit of its roles reads {key}"
            );
        }
    }
}

#[test]
fn the_collection_of_the_three_host_install_is_valid() {
    let path = checkout_path("deploy/collections/web.xml");
    let out = crawlfleet(&[
        "config".into(),
        "check".into(),
        path.to_string_lossy().into(),
    ]);
    assert!(out.status.success(), "{}", show("config check", &out));
    // The multinode scheduler's host reads it where the guide installs it.
    let crawl1 = env_file(&checkout_path("deploy/env/crawl1.env"));
    assert!(
        crawl1["MULTINODE_ARGS"].contains("/etc/crawlfleet/collections/web.xml"),
        "{crawl1:?}"
    );
}

#[test]
fn systemd_analyze_verifies_the_units() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: systemd-analyze is not installed (Debian package systemd)");
        return;
    }
    // verify checks that ExecStart's binary exists: the one built stands in for the installed.
    let dir = temp_dir("deploy-verify");
    let mut files = Vec::new();
    for u in units() {
        let text = std::fs::read_to_string(&u.path).unwrap();
        let to = dir.path().join(u.path.file_name().unwrap());
        std::fs::write(
            &to,
            text.replace(INSTALLED_BIN, env!("CARGO_BIN_EXE_crawlfleet")),
        )
        .unwrap();
        files.push(to);
    }
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .args(&files)
        .current_dir(dir.path())
        .output()
        .unwrap();
    // A warning (an unknown key, a value systemd cannot parse) is printed but does not fail
    // verify: any output about the units fails the test.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let about_units: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("crawlfleet-"))
        .collect();
    assert!(
        out.status.success() && about_units.is_empty(),
        "{}",
        show("systemd-analyze verify", &out)
    );

    for f in &files {
        let out = Command::new("systemd-analyze")
            .args(["security", "--offline=yes", "--no-pager"])
            .arg(format!("--threshold={MAX_EXPOSURE}"))
            .arg(f)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            show(&format!("systemd-analyze security {}", f.display()), &out)
        );
    }
}
