//! deploy/ as an operator installs it (deploy/README.md): the systemd units pass only flags that
//! `crawlfleet ROLE --help` lists, every host's environment file gives its units every setting
//! they need and nothing they do not read, the command line each unit runs on each host is one
//! crawlfleet accepts, the collection passes `crawlfleet config check`, and `systemd-analyze
//! verify` and `systemd-analyze security` pass the units (skipped without systemd-analyze, which
//! .ci/run installs). Then the three hosts run on loopback (each host's addresses moved to
//! 127.20.0.N, its own loopback to 127.21.0.N), every role as its unit runs it with its host's
//! file, and crawl a synthetic web to the end: fed by the nodes, indexed by the distributors,
//! forwarded to the replica and the link store.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crawlfleet_core::checksum::durable::DupStores;
use crawlfleet_core::synthweb::{SyntheticWeb, WebSpec};

use crate::util::{checkout_path, hex, temp_dir, Role};

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

/// A host's environment file moved onto loopback: its cluster address 10.20.0.N becomes
/// 127.20.0.N, its own loopback 127.0.0.1 becomes 127.21.0.`host` (two hosts' admin ports on the
/// same port must not meet), and the collection's path is `collection`'s.
fn on_loopback(
    env: &BTreeMap<String, String>,
    host: u8,
    collection: &Path,
) -> BTreeMap<String, String> {
    env.iter()
        .map(|(k, v)| {
            let v = v
                .replace("10.20.0.", "127.20.0.")
                .replace("127.0.0.1:", &format!("127.21.0.{host}:"))
                .replace(
                    "/etc/crawlfleet/collections/web.xml",
                    &collection.to_string_lossy(),
                );
            (k.clone(), v)
        })
        .collect()
}

/// The documents a node fed (its document log, through `crawlfleet docs`): URI -> MD5 in hex.
fn fed(node_dir: &Path) -> BTreeMap<String, String> {
    let out = crawlfleet(&[
        "docs".into(),
        "--data-dir".into(),
        node_dir.to_string_lossy().into(),
        "web".into(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            (cols.len() == 6).then(|| (cols[3].to_string(), cols[4].to_string()))
        })
        .collect()
}

#[test]
fn the_three_hosts_crawl_on_loopback_as_their_units_run_them() {
    let dir = temp_dir("deploy-loopback");
    // The web the collection crawls, and the collection: the synthetic web's, with the
    // duplicate servers of deploy/collections/web.xml.
    let web_xml = dir.path().join("synthweb.xml");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_crawlfleet"));
    cmd.args([
        "synthweb",
        "--web",
        "4:10",
        "--base",
        "127.94.0.1",
        "--collection-name",
        "web",
    ])
    .arg("--collection")
    .arg(&web_xml);
    let web = Role::spawn(cmd);
    let deploy_xml = std::fs::read_to_string(checkout_path("deploy/collections/web.xml")).unwrap();
    let ppdup = &deploy_xml[deploy_xml.find("<section name=\"ppdup\">").unwrap()
        ..deploy_xml.find("</DomainSpecification>").unwrap()];
    let collection = dir.path().join("web.xml");
    let xml = std::fs::read_to_string(&web_xml).unwrap().replace(
        "</DomainSpecification>",
        &format!(
            "{}</DomainSpecification>",
            ppdup.replace("10.20.0.", "127.20.0.")
        ),
    );
    std::fs::write(&collection, xml).unwrap();

    // Every role of crawl1, crawl2 and crawl3, as its unit runs it with the host's file.
    let units = units();
    let mut roles = Vec::new();
    let mut state = BTreeMap::new();
    for (n, host) in [(1u8, "crawl1"), (2, "crawl2"), (3, "crawl3")] {
        let file = env_file(&checkout_path(&format!("deploy/env/{host}.env")));
        let env = on_loopback(&file, n, &collection);
        let root = dir.path().join("state").join(host);
        for role in env["CRAWLFLEET_ROLES"].split_whitespace() {
            let u = units.iter().find(|u| u.role == role).unwrap();
            let log = dir.path().join(format!("{host}-{role}.log"));
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_crawlfleet"));
            cmd.args(u.command_line(&env, &root))
                .env("RUST_LOG", &env["RUST_LOG"])
                .stderr(Stdio::from(File::create(&log).unwrap()));
            roles.push((format!("{host} {role}"), Role::spawn(cmd), log));
            state.insert(format!("{host} {role}"), root.join("crawlfleet").join(role));
        }
    }

    // The crawl goes through: every storable document (one of each group of identical ones)
    // fed by a node, and the distributors' index holding them.
    let spec: WebSpec = "4:10".parse().unwrap();
    let exp =
        SyntheticWeb::generate(&spec, Ipv4Addr::new(127, 94, 0, 1), web.addr().port()).expected();
    let want = exp.stored.len() + exp.duplicate_groups.len();
    let nodes = [&state["crawl2 node"], &state["crawl3 node"]];
    let deadline = Instant::now() + Duration::from_secs(120);
    let all_fed = loop {
        let all: BTreeMap<String, String> = nodes.iter().flat_map(|d| fed(d)).collect();
        if all.len() >= want {
            break all;
        }
        if Instant::now() >= deadline {
            let logs: Vec<String> = roles
                .iter()
                .map(|(name, _, log)| {
                    format!("--- {name}\n{}", std::fs::read_to_string(log).unwrap())
                })
                .collect();
            panic!(
                "{} of {want} documents fed in 120 s\n{}",
                all.len(),
                logs.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    for uri in &exp.stored {
        let dup = exp.duplicate_groups.iter().any(|g| g.contains(uri));
        assert!(dup || all_fed.contains_key(uri), "{uri} never fed");
    }
    let index_args = |dirs: &[&PathBuf]| {
        let mut a = vec!["index".to_string()];
        for d in dirs {
            a.extend(["--data-dir".to_string(), d.to_string_lossy().into_owned()]);
        }
        a.push("web".into());
        a
    };
    let distributors = [&state["crawl2 distributor"], &state["crawl3 distributor"]];
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let out = crawlfleet(&index_args(&distributors));
        let indexed = String::from_utf8_lossy(&out.stdout).lines().count();
        if indexed >= want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{indexed} of {want} documents in the distributors' index: {}",
            show("index", &out)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The link store on crawl1 took the nodes' link data: the out-links of a host's root page.
    let root_suffix = format!(":{}/", web.addr().port());
    let root = all_fed
        .keys()
        .find(|u| u.ends_with(&root_suffix))
        .cloned()
        .expect("a host's root page fed");
    let links_args: Vec<String> = ["links", "--data-dir"]
        .iter()
        .map(|s| s.to_string())
        .chain([
            state["crawl1 linkstore"].to_string_lossy().into_owned(),
            "outlinks".into(),
            root.clone(),
        ])
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = crawlfleet(&links_args);
        if out.status.success() && !out.stdout.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{}",
            show("links outlinks", &out)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The duplicate server answers a node only once its replica on crawl2 has the checksum
    // (MS-FSCMT 3.3.5.4), so with every role stopped the replica holds every fed document's.
    let logs: Vec<(String, PathBuf)> = roles
        .iter()
        .map(|(n, _, l)| (n.clone(), l.clone()))
        .collect();
    drop(roles);
    let (stores, _) = DupStores::open(&state["crawl2 dupreplica"], 16).unwrap();
    let replica: BTreeSet<String> = stores
        .collection(b"web")
        .map(|c| c.store.iter().map(|(cs, _, _)| hex(&cs.0)).collect())
        .unwrap_or_default();
    let missing: Vec<&String> = all_fed
        .iter()
        .filter(|(_, md5)| !replica.contains(*md5))
        .map(|(u, _)| u)
        .collect();
    assert!(missing.is_empty(), "fed, not in the replica: {missing:?}");
    // crawl3 logs as JSON: every line node2 and distributor 2 wrote is an object.
    for (name, log) in logs.iter().filter(|(name, _)| name.starts_with("crawl3")) {
        for line in std::fs::read_to_string(log).unwrap().lines() {
            let v: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {line}"));
            assert_eq!(v["role"], name.split(' ').nth(1).unwrap(), "{line}");
        }
    }
    eprintln!(
        "three hosts on loopback: {want} documents fed by node1 and node2 ({} and {}), all in the \
         distributors' index",
        fed(nodes[0]).len(),
        fed(nodes[1]).len()
    );
}
