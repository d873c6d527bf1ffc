//! What several benches share (a module of each bench target, not a bench of its own).

use std::net::Ipv4Addr;

use crawlfleet_core::synthweb::{SyntheticWeb, WebSpec};
use url::Url;

/// A page of the plain synthetic web `bench crawl` serves: its URL and its body.
pub fn plain_page() -> (Url, Vec<u8>) {
    let spec: WebSpec = "4:2000".parse().expect("spec");
    let spec = WebSpec {
        plain: true,
        ..spec
    };
    let web = SyntheticWeb::generate(&spec, Ipv4Addr::new(127, 77, 0, 1), 8080);
    let host = web.hosts()[1];
    let path = "/s5/p117.html";
    let reply = web.respond(host, path);
    assert_eq!(reply.status, 200);
    let url = Url::parse(&format!("http://{host}{path}")).expect("url");
    (url, reply.body)
}
