//! The web written out: a collection configuration for crawling it, and a static tree with an
//! nginx configuration that serves the same bytes.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::page::{Page, TargetOf, EXTRAS};
use super::SyntheticWeb;

/// The exclude_uris rule of [`SyntheticWeb::collection_xml`]: `/excluded/` on every host.
pub const EXCLUDE_RULE: &str = "regexp:http://[^/]+/excluded/.*";

impl SyntheticWeb {
    /// A collection configuration (the XML of docs/collection-config.md) for crawling this web:
    /// its start URIs, `delay` 0, `robots` and `check_meta_robots` on, `obey_robots_delay` off,
    /// `include_domains` exactly the web's host addresses, `exclude_uris` [`EXCLUDE_RULE`],
    /// `max_doc_size` 5242880 and `allowed_types` text/html, and unless the web is plain
    /// `sitemaps` on. `name` is escaped as XML needs.
    pub fn collection_xml(&self, name: &str) -> String {
        let mut s = String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<CrawlerConfig>\n");
        let _ = writeln!(
            s,
            "  <DomainSpecification name=\"{}\">",
            quick_xml::escape::escape(name)
        );
        let list = |s: &mut String, name: &str, members: &mut dyn Iterator<Item = String>| {
            let _ = writeln!(s, "    <attrib name=\"{name}\" type=\"list-string\">");
            for m in members {
                let _ = writeln!(
                    s,
                    "      <member>{}</member>",
                    quick_xml::escape::escape(&m)
                );
            }
            s.push_str("    </attrib>\n");
        };
        list(&mut s, "start_uris", &mut self.start_uris().into_iter());
        list(
            &mut s,
            "include_domains",
            &mut self.addrs.iter().map(|a| a.to_string()),
        );
        list(
            &mut s,
            "exclude_uris",
            &mut std::iter::once(EXCLUDE_RULE.to_string()),
        );
        list(
            &mut s,
            "allowed_types",
            &mut std::iter::once("text/html".to_string()),
        );
        if !self.spec.plain {
            // The web publishes sitemaps (render.rs): the crawl reads them.
            s.push_str("    <attrib name=\"sitemaps\" type=\"boolean\">yes</attrib>\n");
        }
        s.push_str(
            "    <attrib name=\"delay\" type=\"real\">0</attrib>\n\
             \x20   <attrib name=\"robots\" type=\"boolean\">yes</attrib>\n\
             \x20   <attrib name=\"check_meta_robots\" type=\"boolean\">yes</attrib>\n\
             \x20   <attrib name=\"obey_robots_delay\" type=\"boolean\">no</attrib>\n\
             \x20   <attrib name=\"max_doc_size\" type=\"integer\">5242880</attrib>\n\
             \x20   <section name=\"crawlmode\">\n\
             \x20     <attrib name=\"mode\" type=\"string\">FULL</attrib>\n\
             \x20   </section>\n\
             \x20 </DomainSpecification>\n</CrawlerConfig>\n",
        );
        s
    }

    /// Every page host `h` answers with something other than 404, robots.txt first.
    pub(crate) fn pages_of(&self, h: u32) -> Vec<Page> {
        let mut out = vec![Page::Robots, Page::Big, Page::Sitemap];
        out.extend((0..self.spec.pages as u32).map(Page::Tree));
        for j in 0..self.extras {
            out.extend(EXTRAS.iter().map(|k| Page::Extra(*k, j)));
            out.extend([Page::ChainB(j), Page::DupB(j), Page::Orphan(j)]);
            out.extend(
                [TargetOf::Moved, TargetOf::Chain, TargetOf::Refresh].map(|t| Page::Target(t, j)),
            );
        }
        out.retain(|p| self.exists(h, *p));
        out
    }

    /// Writes the web as a static tree under `dir/www/<address>/` and `dir/nginx.conf`, which
    /// serves it with one `server` per host (`listen address:port`), redirects as `return`,
    /// the access log (tab-separated: address:port, URI, status, time, request time,
    /// connection) in `dir/access.log` and every other file nginx writes under `dir`. The conf
    /// runs nginx in the foreground (`daemon off`). Slow pages are served without delay. Returns
    /// the path of nginx.conf.
    pub fn write_nginx(&self, dir: &Path) -> io::Result<PathBuf> {
        fs::create_dir_all(dir)?;
        let dir = fs::canonicalize(dir)?;
        let d = dir.to_str().filter(|d| !d.contains(['"', '\\', '$', '\n']));
        let Some(d) = d else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} cannot be written in nginx.conf", dir.display()),
            ));
        };
        for t in ["body", "proxy", "fastcgi", "uwsgi", "scgi"] {
            fs::create_dir_all(dir.join("tmp").join(t))?;
        }
        let mut conf = format!(
            "# The synthetic web {}:{} (seed {}{}), written by crawlfleet synthweb.\n\
             worker_processes 2;\ndaemon off;\npid \"{d}/nginx.pid\";\n\
             error_log \"{d}/error.log\" warn;\n\
             events {{\n    worker_connections 4096;\n}}\n\
             http {{\n    types {{\n        text/html html;\n        image/png png;\n        \
             text/plain txt;\n    }}\n    default_type application/octet-stream;\n    \
             log_format synthweb \"$server_addr:$server_port\\t$request_uri\\t$status\\t$msec\\t\
             $request_time\\t$connection\";\n    \
             access_log \"{d}/access.log\" synthweb;\n",
            self.spec.hosts,
            self.spec.pages,
            self.spec.seed,
            if self.spec.plain { ", plain" } else { "" },
        );
        for t in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"] {
            let sub = t.trim_start_matches("client_");
            let _ = writeln!(conf, "    {t}_temp_path \"{d}/tmp/{sub}\";");
        }
        conf.push_str(
            "    absolute_redirect off;\n    server_tokens off;\n    sendfile on;\n    \
             keepalive_requests 1000000;\n",
        );
        for (h, addr) in self.hosts().into_iter().enumerate() {
            let h = h as u32;
            let root = dir.join("www").join(addr.ip().to_string());
            let _ = write!(
                conf,
                "    server {{\n        listen {addr};\n        root \"{d}/www/{}\";\n        \
                 index index.html;\n",
                addr.ip()
            );
            for page in self.pages_of(h) {
                let reply = self.respond(addr, &page.path());
                if let Some(location) = reply.header("Location") {
                    let _ = writeln!(
                        conf,
                        "        location = {} {{\n            return {} {location};\n        }}",
                        page.path(),
                        reply.status
                    );
                    continue;
                }
                let path = match page {
                    Page::Tree(0) => "/index.html".to_string(),
                    _ => page.path(),
                };
                let file = root.join(path.trim_start_matches('/'));
                if let Some(parent) = file.parent() {
                    fs::create_dir_all(parent)?;
                }
                fs::write(&file, &reply.body)?;
            }
            conf.push_str("    }\n");
        }
        conf.push_str("}\n");
        let path = dir.join("nginx.conf");
        fs::write(&path, conf)?;
        Ok(path)
    }
}
