//! A collection's crawl counters as the engine keeps them: [`CrawlCounters`] with a journal of
//! what they gained since it was last cleared, in the units of the per-site statistics
//! (`stats::sites`, FSCADM 2.2.4.9). The per-site tally (`site_tally.rs`) clears the journal
//! before an operation on one site and books what it holds after, so a site's statistics cost
//! what the operation counted (a few counters and buckets) rather than a comparison of every
//! counter and histogram of the collection, twice per page.
//!
//! Every change goes through a method here: [`Counted`] reads as a [`CrawlCounters`] (it
//! dereferences to one) but cannot be changed field by field, so no count escapes the journal.

use std::ops::Deref;

use super::counters::CrawlCounters;
use crate::stats::sites::CONTINUOUS;

/// The counters of [`CrawlCounters`] counted by whole numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    /// URIs requested (Processed).
    Processed,
    /// HTTP responses (Downloaded).
    Downloaded,
    /// Documents stored (Stored).
    Stored,
    /// Modified documents (Modified).
    Modified,
    /// Unchanged documents (Unchanged).
    Unchanged,
    /// Deleted documents (Deleted).
    Deleted,
    /// Bytes read (ReadNet).
    ReadNet,
    /// Bytes written (WriteNet).
    WriteNet,
    /// Documents with Last-Modified (HasLastMod).
    HasLastMod,
    /// Documents with an ETag (HasETag).
    HasEtag,
    /// Retried fetches (Retries).
    Retries,
    /// robots.txt files naming a sitemap (HasSitemap).
    HasSitemap,
    /// Links to other sites (LocalFwd).
    LocalFwd,
    /// Links within the site (Local).
    Local,
    /// Redirects followed (not a per-site attribute).
    Redirects,
    /// Sitemap files read (not a per-site attribute).
    SitemapsRead,
    /// Sitemap files refused (not a per-site attribute).
    SitemapsRefused,
    /// Stored URIs a sitemap let the refresh skip (not a per-site attribute).
    SitemapSkipped,
}

/// Index of DLTime in [`CONTINUOUS`]; of DocSize.
const DLTIME: usize = 10;
const DOCSIZE: usize = 11;

impl Count {
    /// The field it counts, and its index in [`CONTINUOUS`] when it is a per-site attribute.
    fn field(self, c: &mut CrawlCounters) -> (&mut u64, Option<usize>) {
        match self {
            Count::Processed => (&mut c.processed, Some(0)),
            Count::Downloaded => (&mut c.downloaded, Some(1)),
            Count::Stored => (&mut c.stored, Some(2)),
            Count::Modified => (&mut c.modified, Some(3)),
            Count::Unchanged => (&mut c.unchanged, Some(4)),
            Count::Deleted => (&mut c.deleted, Some(5)),
            Count::ReadNet => (&mut c.read_net, Some(6)),
            Count::WriteNet => (&mut c.write_net, Some(7)),
            Count::HasLastMod => (&mut c.has_last_mod, Some(8)),
            Count::HasEtag => (&mut c.has_etag, Some(9)),
            Count::Retries => (&mut c.retries, Some(12)),
            Count::HasSitemap => (&mut c.has_sitemap, Some(13)),
            Count::LocalFwd => (&mut c.local_fwd, Some(14)),
            Count::Local => (&mut c.local, Some(15)),
            Count::Redirects => (&mut c.redirects, None),
            Count::SitemapsRead => (&mut c.sitemaps_read, None),
            Count::SitemapsRefused => (&mut c.sitemaps_refused, None),
            Count::SitemapSkipped => (&mut c.sitemap_skipped, None),
        }
    }
}

/// A histogram bucket as the counters key it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Bucket {
    /// An HTTPResponse status.
    Status(u16),
    /// A URISkip or DocSkip code.
    Code(&'static str),
    /// A MimeType.
    Mime(String),
}

/// Index of each histogram in `stats::sites::HISTOGRAMS`.
const HTTP_RESPONSE: u8 = 0;
const URI_SKIP: u8 = 1;
const DOC_SKIP: u8 = 2;
const MIME_TYPE: u8 = 3;

/// What the counters gained since the journal was last cleared.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Journal {
    /// Rises of the whole-number attributes, by index in [`CONTINUOUS`].
    ints: [u64; 16],
    /// The rise of DLTime, seconds.
    dl_time: f64,
    /// Bit i: attribute i of [`CONTINUOUS`] rose.
    touched: u16,
    /// Histogram rises: (index in `HISTOGRAMS`, bucket, by), one entry per bucket.
    hist: Vec<(u8, Bucket, u64)>,
}

impl Journal {
    /// True when nothing rose.
    pub fn is_empty(&self) -> bool {
        self.touched == 0 && self.hist.is_empty()
    }

    /// Forgets what rose.
    pub fn clear(&mut self) {
        if self.touched != 0 {
            self.ints = [0; 16];
            self.dl_time = 0.0;
            self.touched = 0;
        }
        self.hist.clear();
    }

    fn add(&mut self, i: usize, n: u64) {
        self.ints[i] += n;
        self.touched |= 1 << i;
    }

    fn rise(&mut self, attr: u8, bucket: Bucket) {
        match self
            .hist
            .iter_mut()
            .find(|(a, b, _)| *a == attr && *b == bucket)
        {
            Some(x) => x.2 += 1,
            None => self.hist.push((attr, bucket, 1)),
        }
    }

    /// The attributes that rose, as (index in [`CONTINUOUS`], rise): DLTime in seconds.
    pub fn continuous(&self) -> impl Iterator<Item = (u8, f64)> + '_ {
        (0..CONTINUOUS.len())
            .filter(|i| self.touched & (1 << i) != 0)
            .map(|i| {
                let v = if i == DLTIME {
                    self.dl_time
                } else {
                    self.ints[i] as f64
                };
                (i as u8, v)
            })
    }

    /// The buckets that rose, ordered by histogram and bucket (as the counters keep them).
    pub fn histograms(&mut self) -> &[(u8, Bucket, u64)] {
        if self.hist.len() > 1 {
            self.hist
                .sort_unstable_by(|x, y| (x.0, &x.1).cmp(&(y.0, &y.1)));
        }
        &self.hist
    }
}

/// A collection's counters and the journal of their changes.
#[derive(Debug, Default)]
pub struct Counted {
    counters: CrawlCounters,
    journal: Journal,
}

impl Deref for Counted {
    type Target = CrawlCounters;

    fn deref(&self) -> &CrawlCounters {
        &self.counters
    }
}

impl Counted {
    /// Counts `n` more of `what`.
    pub fn add(&mut self, what: Count, n: u64) {
        if n == 0 {
            return;
        }
        let (field, attr) = what.field(&mut self.counters);
        *field += n;
        if let Some(i) = attr {
            self.journal.add(i, n);
        }
    }

    /// [`CrawlCounters::count_doc`].
    pub fn count_doc(&mut self, bytes: u64) {
        self.counters.count_doc(bytes);
        if bytes > 0 {
            self.journal.add(DOCSIZE, bytes);
        }
    }

    /// [`CrawlCounters::count_download`]; the journal takes the rise of the sum, as a
    /// comparison of the sums before and after would.
    pub fn count_download(&mut self, secs: f64) {
        let before = self.counters.dl_time;
        self.counters.count_download(secs);
        let rise = self.counters.dl_time - before;
        if rise > 0.0 {
            self.journal.dl_time += rise;
            self.journal.touched |= 1 << DLTIME;
        }
    }

    /// [`CrawlCounters::skip_uri`].
    pub fn skip_uri(&mut self, code: &'static str) {
        self.counters.skip_uri(code);
        self.journal.rise(URI_SKIP, Bucket::Code(code));
    }

    /// [`CrawlCounters::skip_doc`].
    pub fn skip_doc(&mut self, code: &'static str) {
        self.counters.skip_doc(code);
        self.journal.rise(DOC_SKIP, Bucket::Code(code));
    }

    /// Counts an HTTP response status (HTTPResponse).
    pub fn http_status(&mut self, status: u16) {
        *self.counters.http_response.entry(status).or_default() += 1;
        self.journal.rise(HTTP_RESPONSE, Bucket::Status(status));
    }

    /// Counts a document's MIME type (MimeType).
    pub fn mime_type(&mut self, mime: &str) {
        match self.counters.mime_type.get_mut(mime) {
            Some(n) => *n += 1,
            None => {
                self.counters.mime_type.insert(mime.to_string(), 1);
            }
        }
        self.journal.rise(MIME_TYPE, Bucket::Mime(mime.to_string()));
    }

    /// [`CrawlCounters::take_extremes`].
    pub fn take_extremes(&mut self) -> super::counters::Extremes {
        self.counters.take_extremes()
    }

    /// The journal of the changes since it was last cleared.
    pub fn journal_mut(&mut self) -> &mut Journal {
        &mut self.journal
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crawl::counters::{doc_skip, uri_skip};

    #[test]
    fn each_count_moves_its_field_and_the_journal_its_attribute() {
        let all = [
            (Count::Processed, "Processed"),
            (Count::Downloaded, "Downloaded"),
            (Count::Stored, "Stored"),
            (Count::Modified, "Modified"),
            (Count::Unchanged, "Unchanged"),
            (Count::Deleted, "Deleted"),
            (Count::ReadNet, "ReadNet"),
            (Count::WriteNet, "WriteNet"),
            (Count::HasLastMod, "HasLastMod"),
            (Count::HasEtag, "HasETag"),
            (Count::Retries, "Retries"),
            (Count::HasSitemap, "HasSitemap"),
            (Count::LocalFwd, "LocalFwd"),
            (Count::Local, "Local"),
        ];
        for (k, (what, name)) in all.into_iter().enumerate() {
            let mut c = Counted::default();
            let before = c.continuous();
            c.add(what, k as u64 + 2);
            // The field is the one the FSCADM name reads.
            let rose: Vec<_> = c
                .continuous()
                .iter()
                .zip(before.iter())
                .filter(|(a, b)| a.1 != b.1)
                .map(|(a, b)| (a.0, a.1 - b.1))
                .collect();
            assert_eq!(rose, [(name, k as f64 + 2.0)]);
            let j: Vec<_> = c.journal_mut().continuous().collect();
            assert_eq!(j.len(), 1);
            assert_eq!(CONTINUOUS[usize::from(j[0].0)], name);
            assert_eq!(j[0].1, k as f64 + 2.0);
        }
        let mut c = Counted::default();
        for what in [
            Count::Redirects,
            Count::SitemapsRead,
            Count::SitemapsRefused,
            Count::SitemapSkipped,
        ] {
            c.add(what, 1);
        }
        c.add(Count::Local, 0);
        assert!(c.journal_mut().is_empty());
        assert_eq!(
            (
                c.redirects,
                c.sitemaps_read,
                c.sitemaps_refused,
                c.sitemap_skipped
            ),
            (1, 1, 1, 1)
        );
    }

    #[test]
    fn histograms_come_out_sorted_once_per_bucket_and_clear_empties() {
        let mut c = Counted::default();
        c.mime_type("text/plain");
        c.skip_doc(doc_skip::MIME);
        c.http_status(404);
        c.http_status(200);
        c.skip_uri(uri_skip::ROBOTS);
        c.skip_uri(uri_skip::DEPTH);
        c.skip_uri(uri_skip::ROBOTS);
        c.mime_type("text/html");
        c.count_download(0.25);
        c.count_doc(10);
        assert_eq!(c.mime_type.get("text/plain"), Some(&1));
        assert_eq!(c.uri_skip.get(uri_skip::ROBOTS), Some(&2));
        let j = c.journal_mut();
        assert_eq!(
            j.histograms(),
            [
                (0, Bucket::Status(200), 1),
                (0, Bucket::Status(404), 1),
                (1, Bucket::Code("de"), 1),
                (1, Bucket::Code("ro"), 2),
                (2, Bucket::Code("mi"), 1),
                (3, Bucket::Mime("text/html".into()), 1),
                (3, Bucket::Mime("text/plain".into()), 1),
            ]
        );
        assert_eq!(j.continuous().collect::<Vec<_>>(), [(10, 0.25), (11, 10.0)]);
        j.clear();
        assert!(j.is_empty());
        assert_eq!(j.continuous().count(), 0);
        // A download of no time is no rise.
        c.count_download(0.0);
        assert!(c.journal_mut().is_empty());
        assert_eq!(c.downloads, 2);
    }
}
