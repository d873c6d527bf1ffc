//! The crawl engine's pure parts: link extraction, robots.txt, crawl counters and the engine
//! that turns allowed crawl queue entries into fetches and fetch outcomes into actions
//! (MS-FSCMT 3.1, MS-FSCADM 2.2.3.1-2 and 2.2.4.9).

pub mod counted;
pub mod counters;
pub mod engine;
pub mod form;
pub mod links;
mod resolve;
pub mod robots;
pub mod site_tally;
pub mod sitemaps;
mod types;

pub use counted::{Count, Counted};
pub use counters::CrawlCounters;
pub use engine::{CrawlEngine, SiteKey, VISIT_HELD_MAX};
pub use resolve::{origin_site, parse_on_site};
pub(crate) use types::header;
pub use types::{
    link_entries, Action, Document, EngineOptions, Failure, Fetched, LinkToQueue, Outcome,
    PageLink, Request,
};

#[cfg(test)]
mod tests;
