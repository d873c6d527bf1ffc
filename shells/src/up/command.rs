//! The `crawlfleet up` command: the cluster of [`Cluster`] started from the command line's
//! collections (and synthetic web), watched, summarised and stopped.

use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawlfleet_core::config::to_xml;
use crawlfleet_core::marshal::Value;
use crawlfleet_core::synthweb::{Publish, SyntheticWeb, WebSpec};

use super::layout::{self, Layout};
use super::progress::{self, Progress};
use super::summary::{
    self, indexnow_dropped, print_search_example, rup_counters, summarize, wait_published,
};
use super::{Cluster, CollectionSource, FeedingOptions, WatchOptions};
use crate::cli::UpArgs;
use crate::synthweb::SynthServer;

/// How long `up --until-idle` waits at the end for the distributors to acknowledge the
/// documents fed.
const FEED_WAIT: Duration = Duration::from_secs(60);

/// Runs the cluster; with `--until-idle`, until every collection is crawled; Ctrl-C or SIGTERM
/// stops it (exit 0, the summary so far), a second Ctrl-C forces the exit (130).
pub fn run(args: &UpArgs) -> Result<ExitCode, String> {
    crate::set_quiet(true);
    // Every configuration is checked before anything starts (docs/collection-config.md).
    let mut sources: Vec<CollectionSource> = Vec::new();
    for path in &args.config {
        let mut xml = String::from("<CrawlerConfig>\n");
        for (name, dict) in crate::configfile::load(path)? {
            let one = to_xml(&name, &dict).map_err(|e| format!("{}: {e}", path.display()))?;
            // to_xml writes a whole document per collection: keep its DomainSpecification.
            let start = one.find("<DomainSpecification").unwrap_or(0);
            let end = one.rfind("</CrawlerConfig>").unwrap_or(one.len());
            xml.push_str(&one[start..end]);
        }
        xml.push_str("</CrawlerConfig>\n");
        sources.push(CollectionSource {
            origin: path.display().to_string(),
            xml,
            overrides: Vec::new(),
        });
    }
    let data_dir = match &args.data_dir {
        Some(d) => d.clone(),
        None => layout::default_dir(),
    };
    let mut layout = Layout::open(&data_dir, args.fresh)?;
    let stop = crate::stop::on_signals()?;
    let (mut web_server, mut web_smtps) = (None, None);
    if let Some(spec) = &args.synthetic_web {
        let spec: WebSpec = spec.parse().map_err(|e| format!("--synthetic-web: {e}"))?;
        let spec = WebSpec {
            seed: args.seed,
            ..spec
        };
        let base: Ipv4Addr = args.web_base;
        let port = match args.web_port {
            Some(p) => p,
            None => {
                let pick = || {
                    crawlfleet_net::reserve::bind_and_hold((base, 0).into())
                        .map_err(|e| format!("no free port on {base}: {e}"))
                };
                layout.addr(&format!("web-{base}"), pick)?.port()
            }
        };
        // Sitemaps with lastmod (robots.txt names them), and changing pages if asked.
        let web = SyntheticWeb::generate(&spec, base, port).publishing(Publish {
            robots_sitemap: true,
            since: crawlfleet_core::clock::Clock::System.now(),
            changes: args.web_changes,
        });
        let web = Arc::new(web);
        // Every host a RUP server too, its reports mailed to the nodes (docs/rup.md), unless
        // --no-web-rup.
        let rup = (!args.no_web_rup).then(|| {
            crate::synthweb::RupOptions::new(layout.dir.join("synthweb-rup"), Default::default())
        });
        web_smtps = rup.as_ref().map(|r| r.targets.clone());
        let server = SynthServer::start_with(web.clone(), args.access_log.as_deref(), rup)
            .map_err(|e| format!("cannot serve the synthetic web: {e}"))?;
        let mut overrides = Vec::new();
        if web_smtps.is_some() {
            overrides.push(("rup", crate::synthweb::up_robot_section(args.web_changes)));
        }
        if let Some(d) = args.web_delay {
            overrides.push(("delay", Value::Float(d)));
        }
        if let Some(n) = args.web_connections {
            overrides.push(("max_pending", Value::int(i64::from(n))));
        }
        if let Some(n) = args.web_max_sites {
            overrides.push(("max_sites", Value::int(i64::from(n))));
        }
        // The link store gets both applications' data (MS-FSWASDR 2.2.1.3): the WebAnalyzer
        // link graph and the SPRel document lines.
        let app = |a: &str| Value::owned_bytes(a.as_bytes().to_vec());
        overrides.push((
            "linkstore",
            Value::Dict(vec![(
                Value::owned_bytes(b"applications".to_vec()),
                Value::list(vec![app("webanalyzer"), app("sharepoint")]),
            )]),
        ));
        sources.push(CollectionSource {
            origin: String::new(),
            xml: web.collection_xml("synthetic"),
            overrides,
        });
        if !args.json {
            progress::tell(
                log::Level::Info,
                format_args!(
                    "synthetic web: {} hosts x {} pages from {} (port {port})",
                    spec.hosts,
                    spec.pages,
                    web.start_uris().join(" ")
                ),
            );
        }
        web_server = Some(server);
    }
    if let Some(dir) = &args.warc {
        let dir = std::path::absolute(dir).map_err(|e| format!("--warc: {e}"))?;
        sources
            .iter_mut()
            .for_each(|s| s.overrides.push(("warc", crate::warc::up_section(&dir))));
    }
    let feeding = FeedingOptions {
        distributors: args.distributors,
        nameserver: args.nameserver,
    };
    let mut cluster = Cluster::start_in(
        &mut layout,
        args.nodes,
        &sources,
        &feeding,
        args.admin_listen,
        &args.access,
    )?;
    if let Some(t) = web_smtps {
        *t.write() = cluster.node_smtps.clone();
    }
    layout.save()?;
    layout.write_admin_addr(cluster.multinode_admin)?;
    layout.write_admin_token(args.access.admin_token_file.as_deref())?;
    announce_start(args, &layout, &cluster);
    let earlier = summary::load(&data_dir);
    cluster.restart_clock();
    let mut progress = Progress::new(
        args.progress_mode(),
        args.json,
        Duration::from_secs_f64(args.progress_interval.max(0.1)),
    );
    let watched = cluster.watch_until(
        &WatchOptions {
            until_idle: args.until_idle,
            idle_seconds: args.idle_seconds,
            timeout: args.timeout,
        },
        &stop,
        &mut |f| progress.show(f),
    );
    progress.finish();
    let (mut sum, stopped) = watched?;
    if stopped && !args.json {
        progress::tell(log::Level::Info, format_args!("crawlfleet up: stopping (Ctrl-C again to force it); the next `crawlfleet up --data-dir {}` resumes", data_dir.display()));
    }
    // A stop does not wait for the distributors: what they did not acknowledge is sent again
    // when the cluster resumes (docs/sessionsink.md).
    let fed = match stopped {
        true => Ok(()),
        false => cluster.wait_fed(FEED_WAIT),
    };
    // The nodes publish their status once more, so the summary counts what they did up to now;
    // then every role stops and flushes (queues, logs, stores, statistics, WARC files): the
    // next `up` on the same directory resumes from there.
    wait_published(&cluster.slots, Instant::now());
    let clean = cluster.stop();
    sum.collections = summarize(&cluster.slots);
    sum.indexnow_dropped = indexnow_dropped(&cluster.slots);
    sum.rup = rup_counters(&cluster.slots);
    sum.add_earlier(&earlier);
    if let Err(e) = summary::save(&data_dir, &sum) {
        log::warn!("{e}");
    }
    sum.print(args.json);
    if let (Some(d), false, false) = (&cluster.distributors, args.json, stopped) {
        let query = if args.synthetic_web.is_some() {
            // Words of the generated web's pages.
            "replica checksum"
        } else {
            "crawl"
        };
        if let Some(c) = sum.collections.keys().next() {
            print_search_example(d, c, query);
        }
    }
    fed?;
    if let Some(s) = web_server {
        s.stop();
    }
    clean.map_err(|e| format!("not every role stopped cleanly: {e}"))?;
    Ok(ExitCode::SUCCESS)
}

/// Says where the cluster is: its data directory and administrative address on standard
/// output (a line each, or one JSON start record with `--json`), the roles on standard error.
fn announce_start(args: &UpArgs, layout: &Layout, cluster: &Cluster) {
    let dir = layout.dir.display().to_string();
    let admins: Vec<String> = cluster.node_admins.iter().map(|a| a.to_string()).collect();
    if args.json {
        let v = serde_json::json!({
            "event": "start",
            "data_dir": dir,
            "resumed": layout.resumed,
            "admin": cluster.multinode_admin.to_string(),
            "node_admins": admins,
            "node_smtps": cluster.node_smtps.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            "multinode": cluster.multinode.to_string(),
            "dupserver": cluster.dupserver.to_string(),
            "replica": cluster.replica.to_string(),
            "linkstore": cluster.linkstore.to_string(),
            "nameserver": cluster.distributors.as_ref().map(|d| d.nameserver.to_string()),
            "distributor_admins": cluster.distributors.as_ref().map_or(Vec::new(), |d| {
                d.admins.iter().map(|a| a.to_string()).collect::<Vec<_>>()
            }),
            "metrics": {
                "dupserver": cluster.metrics.dupserver.to_string(),
                "dupreplica": cluster.metrics.dupreplica.to_string(),
                "linkstore": cluster.metrics.linkstore.to_string(),
            },
        });
        println!("{v}");
        return;
    }
    println!(
        "crawlfleet up: data in {dir} ({})",
        if layout.resumed {
            "resumed"
        } else {
            "new cluster"
        }
    );
    println!(
        "admin {}  (crawlfleet admin --data-dir {dir} collection-get-list)",
        cluster.multinode_admin
    );
    if let Some(d) = &cluster.distributors {
        progress::tell(
            log::Level::Info,
            format_args!(
                "content distributors: name server {}, {} distributors{}",
                d.nameserver,
                d.nodes,
                if d.started.is_empty() {
                    " (existing)".to_string()
                } else {
                    format!(" at {:?}", d.started)
                }
            ),
        );
    }
    progress::tell(
        log::Level::Info,
        format_args!(
            "roles: multinode {}, {} node schedulers (admin {}), duplicate server {} + replica {}, link store {}",
            cluster.multinode,
            cluster.nodes,
            admins.join(" "),
            cluster.dupserver,
            cluster.replica,
            cluster.linkstore,
        ),
    );
    progress::tell(
        log::Level::Info,
        format_args!(
            "metrics: http://{}/metrics (every admin port), duplicate server {}, replica {}, link store {}",
            cluster.multinode_admin,
            cluster.metrics.dupserver,
            cluster.metrics.dupreplica,
            cluster.metrics.linkstore,
        ),
    );
}
