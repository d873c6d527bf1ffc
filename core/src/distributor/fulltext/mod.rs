//! The full-text index a distributor keeps beside each content collection's durable index, so
//! the fed documents can be searched (in FAST, the distributor's sessions feed an indexer; this
//! is ours). Built on tantivy, in `<distributor data dir>/search/<collection>/`.
//!
//! Fields: `uri` (stored, matched exactly: the document id), `title` and `text` (stored,
//! tokenized; extracted by [`extract`]: the visible text of HTML, plain text as it is), `site`
//! (the URI's host, exact), `fetch_time` (unix seconds) and `checksum` (hex).
//!
//! The durable log of the content index is the truth; this index follows it. [`FullText::apply`]
//! takes each operation as it is applied there with the log position it reaches, and
//! [`FullText::tick`] commits every [`COMMIT_OPS`] operations or [`COMMIT_INTERVAL`] after the
//! first uncommitted one (not per operation: a tantivy commit writes segment files). Each commit
//! carries, as its payload, the log position it covers; on open that position is compared with
//! the log's: an index that is missing, unreadable, or covers another position (behind after a
//! crash between two commits, beyond after the log lost a torn tail) is emptied and
//! [`FullText::rebuild`] from the latest live documents.
//!
//! Readers ([`Searcher`]) open the directory read-only while the distributor writes it:
//! tantivy replaces its `meta.json` atomically and holds its meta lock while it deletes the
//! files of an old commit, so a reader sees one whole commit.
//!
//! ```no_run
//! use crawlfleet_core::distributor::fulltext::{Doc, FullText, Op};
//! let (mut ft, stale) = FullText::open("search/web".as_ref(), 0).unwrap();
//! if stale.is_some() {
//!     ft.rebuild(std::iter::empty::<Doc<'_>>(), 0).unwrap();
//! }
//! let doc = Doc { uri: "http://a.example/", time: 1, checksum: &[0; 16],
//!                 content_type: Some(b"text/plain"), body: b"hello" };
//! ft.apply(&Op::Put(doc), 1).unwrap();
//! ft.commit().unwrap();
//! let hits = ft.search("hello", 10).unwrap();
//! assert_eq!(hits[0].uri, "http://a.example/");
//! ```

pub mod extract;
#[cfg(test)]
mod tests;

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tantivy::collector::TopDocs;
use tantivy::query::QueryParser;
use tantivy::schema::{Field, Schema, SchemaBuilder, Value, FAST, INDEXED, STORED, STRING, TEXT};
use tantivy::snippet::SnippetGenerator;
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

/// A commit after this many uncommitted operations.
pub const COMMIT_OPS: usize = 4096;
/// A commit this long after the first uncommitted operation.
pub const COMMIT_INTERVAL: Duration = Duration::from_secs(1);
/// The indexing memory of one collection's writer (tantivy's least is 15 MB).
const WRITER_MEMORY: usize = 20 << 20;
/// Most hits one search returns.
pub const MAX_LIMIT: usize = 1000;
/// Longest snippet, in characters.
const SNIPPET_CHARS: usize = 200;
/// Marks the payload of our commits, with its version.
const PAYLOAD_FORMAT: &str = "crawlfleet-fulltext/1";

/// The folder of the full-text indexes in a distributor's data directory.
pub const SEARCH_DIR: &str = "search";

/// Where the full-text index of `collection` lives under a distributor's data directory:
/// `search/<collection>/`, with every byte outside `[A-Za-z0-9_.-]` (and a leading dot) written
/// `%XX`, so no collection name can leave the folder.
pub fn dir(data_dir: &Path, collection: &str) -> PathBuf {
    let mut name = String::new();
    for (i, b) in collection.bytes().enumerate() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0) {
            name.push(b as char);
        } else {
            name.push_str(&format!("%{b:02X}"));
        }
    }
    data_dir.join(SEARCH_DIR).join(name)
}

/// What went wrong with a full-text index.
#[derive(Debug)]
pub enum Error {
    /// The directory could not be made or emptied.
    Io(io::Error),
    /// tantivy refused (an unreadable index, a failed write).
    Index(tantivy::TantivyError),
    /// The index holds no commit of ours, or it is not readable.
    NotAnIndex(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "full-text index: {e}"),
            Error::Index(e) => write!(f, "full-text index: {e}"),
            Error::NotAnIndex(why) => write!(f, "full-text index: {why}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

impl From<tantivy::TantivyError> for Error {
    fn from(e: tantivy::TantivyError) -> Self {
        Error::Index(e)
    }
}

/// A fed document's version, as the full-text index takes it.
#[derive(Clone, Copy, Debug)]
pub struct Doc<'a> {
    /// The document id (the URI).
    pub uri: &'a str,
    /// The fetch time, unix seconds.
    pub time: i64,
    /// The checksum the crawler stored (MD5), shown in hex.
    pub checksum: &'a [u8],
    /// The Content-Type header, if the document had one.
    pub content_type: Option<&'a [u8]>,
    /// The body.
    pub body: &'a [u8],
}

/// The Content-Type among a document's headers (the first, name compared without case).
pub fn content_type<'h, I>(headers: I) -> Option<&'h [u8]>
where
    I: IntoIterator<Item = (&'h [u8], &'h [u8])>,
{
    headers
        .into_iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(b"content-type"))
        .map(|(_, v)| v)
}

/// One operation of a feeding session, as it was applied to the content index.
#[derive(Clone, Copy, Debug)]
pub enum Op<'a> {
    /// An add or update: replaces whatever the index held for the URI.
    Put(Doc<'a>),
    /// A remove.
    Remove {
        /// The document id.
        uri: &'a str,
    },
}

/// One search result.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    /// The document id.
    pub uri: String,
    /// The BM25 score (higher is better).
    pub score: f32,
    /// The document's title ("" when it has none).
    pub title: String,
    /// A passage of the text around the query's terms (its start when the terms are only in
    /// the title or the URI).
    pub snippet: String,
}

/// Why an opened index has to be rebuilt (see [`FullText::open`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stale {
    /// No index in the directory.
    Missing,
    /// The index could not be read: the reason.
    Corrupt(String),
    /// The index covers a log position other than the log's: (covered, the log's).
    Position(u64, u64),
}

impl fmt::Display for Stale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stale::Missing => f.write_str("no index"),
            Stale::Corrupt(why) => write!(f, "unreadable ({why})"),
            Stale::Position(c, l) => write!(f, "covers log position {c}, the log is at {l}"),
        }
    }
}

/// The schema's fields.
#[derive(Clone, Copy, Debug)]
struct Fields {
    uri: Field,
    title: Field,
    text: Field,
    site: Field,
    fetch_time: Field,
    checksum: Field,
}

fn schema() -> (Schema, Fields) {
    let mut b = SchemaBuilder::new();
    let fields = Fields {
        uri: b.add_text_field("uri", STRING | STORED),
        title: b.add_text_field("title", TEXT | STORED),
        text: b.add_text_field("text", TEXT | STORED),
        site: b.add_text_field("site", STRING | STORED),
        fetch_time: b.add_i64_field("fetch_time", INDEXED | STORED | FAST),
        checksum: b.add_text_field("checksum", STRING | STORED),
    };
    (b.build(), fields)
}

/// The fields of an opened index, checked against ours.
fn fields_of(index: &Index) -> Result<Fields, Error> {
    let s = index.schema();
    let get = |name: &str| {
        s.get_field(name)
            .map_err(|_| Error::NotAnIndex(format!("no field {name}")))
    };
    Ok(Fields {
        uri: get("uri")?,
        title: get("title")?,
        text: get("text")?,
        site: get("site")?,
        fetch_time: get("fetch_time")?,
        checksum: get("checksum")?,
    })
}

/// The log position a commit's payload names.
fn covered(payload: Option<&str>) -> Option<u64> {
    let rest = payload?
        .strip_prefix(PAYLOAD_FORMAT)?
        .strip_prefix(" position=")?;
    rest.parse().ok()
}

fn payload(position: u64) -> String {
    format!("{PAYLOAD_FORMAT} position={position}")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The search side, shared by the writer ([`FullText::search`]) and read-only [`Searcher`]s.
struct Query {
    index: Index,
    reader: IndexReader,
    fields: Fields,
}

impl Query {
    fn new(index: Index) -> Result<Query, Error> {
        let fields = fields_of(&index)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(Query {
            index,
            reader,
            fields,
        })
    }

    /// The best `limit` documents for `query`: every word must be in the title (counting
    /// double) or the text; the query language is tantivy's (`"a phrase"`, `+must`, `-not`,
    /// `site:host`), and what does not parse in it is taken as plain words.
    fn search(&self, query: &str, limit: usize) -> Result<Vec<Hit>, Error> {
        let limit = limit.clamp(1, MAX_LIMIT);
        let f = self.fields;
        let searcher = self.reader.searcher();
        let mut parser = QueryParser::for_index(&self.index, vec![f.title, f.text]);
        parser.set_field_boost(f.title, 2.0);
        parser.set_conjunction_by_default();
        let (q, _errors) = parser.parse_query_lenient(query);
        let top = searcher.search(&q, &TopDocs::with_limit(limit).order_by_score())?;
        let mut snippets = SnippetGenerator::create(&searcher, &*q, f.text)?;
        snippets.set_max_num_chars(SNIPPET_CHARS);
        let mut hits = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let doc: TantivyDocument = searcher.doc(addr)?;
            let text = |field| {
                doc.get_first(field)
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_owned()
            };
            let body = text(f.text);
            let snippet = snippets.snippet(&body);
            let snippet = if snippet.fragment().is_empty() {
                body.chars().take(SNIPPET_CHARS).collect()
            } else {
                snippet.fragment().to_owned()
            };
            hits.push(Hit {
                uri: text(f.uri),
                score,
                title: text(f.title),
                snippet,
            });
        }
        Ok(hits)
    }

    fn live_docs(&self) -> u64 {
        self.reader.searcher().num_docs()
    }
}

/// A full-text index opened read-only, while its distributor may be writing it.
pub struct Searcher {
    query: Query,
    position: u64,
}

impl Searcher {
    /// Opens the index in `dir` (see [`dir`]) as of its last commit.
    pub fn open(dir: &Path) -> Result<Searcher, Error> {
        if !dir.join("meta.json").exists() {
            return Err(Error::NotAnIndex(format!("no index in {}", dir.display())));
        }
        let index = Index::open_in_dir(dir)?;
        let position = covered(index.load_metas()?.payload.as_deref()).unwrap_or(0);
        Ok(Searcher {
            query: Query::new(index)?,
            position,
        })
    }

    /// See [`FullText::search`].
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<Hit>, Error> {
        self.query.search(query, limit)
    }

    /// The content-index log position the opened commit covers.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The documents in the opened commit.
    pub fn len(&self) -> u64 {
        self.query.live_docs()
    }

    /// Whether the opened commit holds no document.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The writable full-text index of one content collection, owned by its distributor.
pub struct FullText {
    dir: PathBuf,
    query: Query,
    writer: IndexWriter,
    /// The log position of the last commit.
    committed: u64,
    /// The log position of the last applied operation.
    applied: u64,
    /// Operations applied since the last commit.
    pending: usize,
    /// When the first of them was applied.
    pending_since: Option<Instant>,
}

impl FullText {
    /// Opens (or creates) the index in `dir` for a content index whose log is at `log_position`.
    /// The second value says why it must be rebuilt before use, if it must: it is then empty,
    /// and [`FullText::rebuild`] fills it.
    pub fn open(dir: &Path, log_position: u64) -> Result<(FullText, Option<Stale>), Error> {
        let found = if dir.join("meta.json").exists() {
            Self::try_open(dir).map(|(index, covered)| match covered {
                Some(c) if c == log_position => (index, None),
                Some(c) => (index, Some(Stale::Position(c, log_position))),
                None => (
                    index,
                    Some(Stale::Corrupt("no position in its commit".into())),
                ),
            })
        } else {
            Err(Stale::Missing)
        };
        let (index, stale) = match found {
            Ok((index, None)) => (index, None),
            Ok((_, Some(stale))) | Err(stale) => (Self::create(dir)?, Some(stale)),
        };
        let query = Query::new(index)?;
        let writer = query
            .index
            .writer_with_num_threads(1, WRITER_MEMORY)
            .map_err(Error::Index)?;
        let committed = if stale.is_some() { 0 } else { log_position };
        Ok((
            FullText {
                dir: dir.to_owned(),
                query,
                writer,
                committed,
                applied: committed,
                pending: 0,
                pending_since: None,
            },
            stale,
        ))
    }

    /// The index in `dir` and the position its last commit covers; a reason when it is not
    /// readable.
    fn try_open(dir: &Path) -> Result<(Index, Option<u64>), Stale> {
        let corrupt = |e: tantivy::TantivyError| Stale::Corrupt(e.to_string());
        let index = Index::open_in_dir(dir).map_err(corrupt)?;
        fields_of(&index).map_err(|e| Stale::Corrupt(e.to_string()))?;
        let metas = index.load_metas().map_err(corrupt)?;
        // Every segment must open: a file cut or lost shows here rather than on a search.
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(corrupt)?;
        drop(reader);
        Ok((index, covered(metas.payload.as_deref())))
    }

    /// An empty index in `dir`, whatever was there before.
    fn create(dir: &Path) -> Result<Index, Error> {
        match std::fs::remove_dir_all(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        std::fs::create_dir_all(dir)?;
        Ok(Index::create_in_dir(dir, schema().0)?)
    }

    /// The directory of the index.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Empties the index and fills it with `docs`, the latest live version of every document of
    /// the content index, whose log is at `position`; commits. Returns the documents indexed.
    pub fn rebuild<'a, I>(&mut self, docs: I, position: u64) -> Result<u64, Error>
    where
        I: IntoIterator<Item = Doc<'a>>,
    {
        self.clear()?;
        let mut n = 0;
        for doc in docs {
            self.add(&doc)?;
            n += 1;
        }
        self.finish(position)?;
        Ok(n)
    }

    /// Starts a rebuild that [`FullText::add`] fills and [`FullText::finish`] commits, for a
    /// caller that reads the documents through a callback: deletes every document.
    pub fn clear(&mut self) -> Result<(), Error> {
        self.writer.delete_all_documents()?;
        self.pending += 1;
        Ok(())
    }

    /// Adds a document during a rebuild (nothing of the same URI is there to replace).
    pub fn add(&mut self, doc: &Doc<'_>) -> Result<(), Error> {
        self.writer.add_document(self.document(doc))?;
        self.pending += 1;
        Ok(())
    }

    /// Ends a rebuild: commits, covering the log position `position`.
    pub fn finish(&mut self, position: u64) -> Result<(), Error> {
        self.applied = position;
        self.pending = self.pending.max(1);
        self.commit()
    }

    /// The content index's log was rewritten (compacted) into `position` bytes holding every
    /// operation applied so far: commits at once, covering the new position (positions in the
    /// old log mean nothing in the new one).
    pub fn moved_to(&mut self, position: u64) -> Result<(), Error> {
        self.finish(position)
    }

    fn document(&self, doc: &Doc<'_>) -> TantivyDocument {
        let f = self.query.fields;
        let text = extract::text(doc.content_type, doc.body);
        let site = url::Url::parse(doc.uri)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_default();
        let mut d = TantivyDocument::new();
        d.add_text(f.uri, doc.uri);
        d.add_text(f.title, &text.title);
        d.add_text(f.text, &text.body);
        d.add_text(f.site, &site);
        d.add_i64(f.fetch_time, doc.time);
        d.add_text(f.checksum, hex(doc.checksum));
        d
    }

    /// Applies one operation of the content index, which reached log position `position` with
    /// it: an add or update replaces the document with its URI (the old one deleted by its
    /// term, then the new one added; tantivy orders them), a remove deletes it. Seen by
    /// searches after the next commit.
    pub fn apply(&mut self, op: &Op<'_>, position: u64) -> Result<(), Error> {
        self.apply_at(op, position, Instant::now())
    }

    /// [`FullText::apply`] at `now` (the commit timer's start).
    pub fn apply_at(&mut self, op: &Op<'_>, position: u64, now: Instant) -> Result<(), Error> {
        let f = self.query.fields;
        match op {
            Op::Put(doc) => {
                self.writer
                    .delete_term(Term::from_field_text(f.uri, doc.uri));
                self.writer.add_document(self.document(doc))?;
            }
            Op::Remove { uri } => {
                self.writer.delete_term(Term::from_field_text(f.uri, uri));
            }
        }
        self.applied = self.applied.max(position);
        self.pending += 1;
        self.pending_since.get_or_insert(now);
        Ok(())
    }

    /// Commits when [`COMMIT_OPS`] operations wait or the first of them waited
    /// [`COMMIT_INTERVAL`] at `now`; true when it committed.
    pub fn tick(&mut self, now: Instant) -> Result<bool, Error> {
        let due = match self.pending_since {
            Some(since) => {
                self.pending >= COMMIT_OPS
                    || now.saturating_duration_since(since) >= COMMIT_INTERVAL
            }
            None => false,
        };
        if due {
            self.commit()?;
        }
        Ok(due)
    }

    /// When the next commit is due, if an operation waits.
    pub fn next_commit(&self) -> Option<Instant> {
        self.pending_since.map(|s| s + COMMIT_INTERVAL)
    }

    /// Commits what was applied, with the log position it covers, and shows it to searches.
    pub fn commit(&mut self) -> Result<(), Error> {
        if self.pending == 0 {
            return Ok(());
        }
        let mut prepared = self.writer.prepare_commit()?;
        prepared.set_payload(&payload(self.applied));
        prepared.commit()?;
        self.committed = self.applied;
        self.pending = 0;
        self.pending_since = None;
        self.query.reader.reload()?;
        Ok(())
    }

    /// The log position the last commit covers.
    pub fn committed(&self) -> u64 {
        self.committed
    }

    /// The documents searches see.
    pub fn len(&self) -> u64 {
        self.query.live_docs()
    }

    /// Whether searches see no document.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The best `limit` (1..=[`MAX_LIMIT`]) documents for `query`, best first, as of the last
    /// commit. Every word must be in the title (counting double) or the text; the query
    /// language is tantivy's (`"a phrase"`, `+must`, `-not`, `site:host`) and what does not
    /// parse in it is taken as plain words.
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<Hit>, Error> {
        self.query.search(query, limit)
    }

    /// A read-only handle on the same index, for another thread: it shares the writer's
    /// [`IndexReader`], so it sees each commit as soon as [`FullText::commit`] returns.
    pub fn reader(&self) -> Reader {
        Reader {
            query: Query {
                index: self.query.index.clone(),
                reader: self.query.reader.clone(),
                fields: self.query.fields,
            },
        }
    }
}

/// See [`FullText::reader`].
pub struct Reader {
    query: Query,
}

impl Reader {
    /// See [`FullText::search`].
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<Hit>, Error> {
        self.query.search(query, limit)
    }
}
