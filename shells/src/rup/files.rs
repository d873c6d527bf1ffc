//! The static side of the RUP server: GET and HEAD of files under the root, with
//! Last-Modified, ETag and conditional requests (RFC 9110 sections 8.8, 13.1.2, 13.1.3: a
//! matching If-None-Match, or else an If-Modified-Since not older than the file, answers 304).
//!
//! A request path is percent-decoded and read segment by segment: a `..` segment is refused
//! (403), and the file it names is resolved (symbolic links followed) and refused (403) unless
//! it lies under the root, resolved the same way. A directory serves its `index.html`; there
//! are no listings. Files over [`MAX_FILE`] are refused (403): an answer is built in memory.

use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use crawlfleet_core::percent::percent_decode;

/// The largest file served, in bytes (64 MiB).
pub const MAX_FILE: u64 = 64 << 20;

/// An answer: status, content type, extra header fields, body.
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The Content-Type.
    pub content_type: &'static str,
    /// Further header fields.
    pub extra: Vec<(&'static str, String)>,
    /// The body (HEAD sends its length only; 304 sends neither).
    pub body: Vec<u8>,
}

impl Answer {
    /// A text/plain answer of one line.
    pub fn text(status: u16, line: &str) -> Answer {
        Answer {
            status,
            content_type: "text/plain; charset=utf-8",
            extra: Vec::new(),
            body: format!("{line}\n").into_bytes(),
        }
    }
}

/// The file `path` (a request target's path, percent-encoded) names under `root` (resolved).
fn resolve(root: &Path, path: &str) -> Result<PathBuf, Answer> {
    use std::os::unix::ffi::OsStrExt;
    let raw = percent_decode(path).ok_or_else(|| Answer::text(400, "bad percent-encoding"))?;
    if !raw.starts_with(b"/") || raw.contains(&0) {
        return Err(Answer::text(400, "bad request path"));
    }
    let mut full = root.to_path_buf();
    for seg in raw.split(|&b| b == b'/') {
        match seg {
            b"" | b"." => {}
            b".." => return Err(Answer::text(403, "the path leaves the root")),
            s => full.push(std::ffi::OsStr::from_bytes(s)),
        }
    }
    let not_found = || Answer::text(404, "not found");
    let mut real = full.canonicalize().map_err(|_| not_found())?;
    if real.is_dir() {
        real = real
            .join("index.html")
            .canonicalize()
            .map_err(|_| not_found())?;
    }
    if !real.starts_with(root) {
        return Err(Answer::text(403, "the path leaves the root"));
    }
    Ok(real)
}

fn content_type(p: &Path) -> &'static str {
    match p.extension().and_then(|e| e.to_str()) {
        Some("html" | "htm") => "text/html; charset=utf-8",
        Some("txt") => "text/plain; charset=utf-8",
        Some("xml") => "application/xml",
        Some("css") => "text/css",
        Some("js") => "text/javascript",
        Some("json") => "application/json",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("pdf") => "application/pdf",
        _ => "application/octet-stream",
    }
}

/// Whether an If-None-Match field value matches `etag` (weak comparison, RFC 9110 8.8.3.2).
fn none_match(field: &str, etag: &str) -> bool {
    field.split(',').map(str::trim).any(|t| {
        t == "*" || t.strip_prefix("W/").unwrap_or(t) == etag.strip_prefix("W/").unwrap_or(etag)
    })
}

/// Answers a GET or HEAD of `path` under `root` (canonical), given the request's
/// If-None-Match and If-Modified-Since fields.
pub fn serve(root: &Path, path: &str, inm: Option<&str>, ims: Option<&str>) -> Answer {
    let file = match resolve(root, path) {
        Ok(f) => f,
        Err(a) => return a,
    };
    let Ok(meta) = std::fs::metadata(&file) else {
        return Answer::text(404, "not found");
    };
    if !meta.is_file() {
        return Answer::text(404, "not found");
    }
    if meta.len() > MAX_FILE {
        // Answers are built whole in memory: a bound on what one request may cost.
        return Answer::text(403, "the file is larger than this server serves");
    }
    let mtime = meta.modified().unwrap_or(UNIX_EPOCH);
    let since = mtime.duration_since(UNIX_EPOCH).unwrap_or_default();
    let etag = format!("\"{:x}-{:x}\"", meta.len(), since.as_nanos());
    // HTTP dates have whole seconds: compare the file's time cut to the second.
    let mtime_s = UNIX_EPOCH + Duration::from_secs(since.as_secs());
    let last_modified = httpdate::fmt_http_date(mtime_s);
    let validators = vec![("ETag", etag.clone()), ("Last-Modified", last_modified)];
    let not_modified = match (inm, ims) {
        (Some(f), _) => none_match(f, &etag),
        (None, Some(d)) => httpdate::parse_http_date(d).is_ok_and(|d| mtime_s <= d),
        (None, None) => false,
    };
    if not_modified {
        return Answer {
            status: 304,
            content_type: content_type(&file),
            extra: validators,
            body: Vec::new(),
        };
    }
    match std::fs::read(&file) {
        Ok(body) => Answer {
            status: 200,
            content_type: content_type(&file),
            extra: validators,
            body,
        },
        Err(_) => Answer::text(404, "not found"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_decoded_and_kept_under_the_root() {
        assert_eq!(percent_decode("/a%20b%2F"), Some(b"/a b/".to_vec()));
        assert_eq!(percent_decode("/a%2"), None);
        assert_eq!(percent_decode("/a%zz"), None);
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("www");
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::write(root.join("d/index.html"), "i").unwrap();
        std::fs::write(dir.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), root.join("link")).unwrap();
        let root = root.canonicalize().unwrap();
        let status = |p: &str| serve(&root, p, None, None).status;
        assert_eq!(status("/d/"), 200);
        assert_eq!(status("/d/%2E%2E/%2E%2E/secret"), 403);
        assert_eq!(status("/link"), 403);
        assert_eq!(status("/d%00"), 400);
        assert_eq!(status("d/index.html"), 400);
        assert_eq!(status("/nothing"), 404);
    }

    #[test]
    fn if_none_match_compares_weakly() {
        assert!(none_match("\"a\", W/\"b\"", "\"b\""));
        assert!(none_match("*", "\"x\""));
        assert!(!none_match("\"a\"", "\"b\""));
    }
}
