//! The CDXJ index beside each WARC file (the pywb / OpenWayback CDXJ form): one line per
//! `response` and `revisit` record, `SURT TIMESTAMP14 {json}`, sorted, the JSON naming the
//! record's `url`, `mime`, `status`, payload `digest`, compressed `length`, `offset` in the
//! file and `filename`.

use super::record::parse_response;

/// One line of a CDXJ index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CdxEntry {
    /// The sort key: the URI in SURT form ([`surt`]).
    pub surt: String,
    /// `WARC-Date` as 14 digits.
    pub timestamp: String,
    /// `WARC-Target-URI`.
    pub url: String,
    /// The HTTP media type; `warc/revisit` for a revisit record.
    pub mime: String,
    /// The HTTP status code ("-" when it did not parse).
    pub status: String,
    /// The payload digest in base32, without its `sha1:` label ("-" when there is none).
    pub digest: String,
    /// The record's gzip member length.
    pub length: u64,
    /// Where the member starts in the file.
    pub offset: u64,
    /// The WARC file's name (its final name, without `.open`).
    pub filename: String,
}

impl CdxEntry {
    /// The line, without its line feed.
    pub fn line(&self) -> String {
        let json = serde_json::json!({
            "url": self.url,
            "mime": self.mime,
            "status": self.status,
            "digest": self.digest,
            "length": self.length.to_string(),
            "offset": self.offset.to_string(),
            "filename": self.filename,
        });
        format!("{} {} {json}", self.surt, self.timestamp)
    }

    /// The entry of a record, read back from its decompressed head (and, for responses and
    /// revisits, the start of its HTTP block): `None` for other record types or a head that
    /// does not parse. Used to index a file recovered after a crash.
    pub fn from_record(record: &[u8], offset: u64, length: u64, filename: &str) -> Option<Self> {
        let end = record.windows(4).position(|w| w == b"\r\n\r\n")?;
        let head = std::str::from_utf8(&record[..end]).ok()?;
        let mut lines = head.split("\r\n");
        if !lines.next()?.starts_with("WARC/") {
            return None;
        }
        let (mut kind, mut uri, mut date, mut digest) = ("", "", "", "-");
        for line in lines {
            let (name, value) = line.split_once(':')?;
            let value = value.trim();
            match name.to_ascii_lowercase().as_str() {
                "warc-type" => kind = value,
                "warc-target-uri" => uri = value,
                "warc-date" => date = value,
                "warc-payload-digest" => digest = value,
                _ => {}
            }
        }
        if kind != "response" && kind != "revisit" {
            return None;
        }
        let http = parse_response(&record[end + 4..]);
        let timestamp: String = date.chars().filter(char::is_ascii_digit).take(14).collect();
        Some(CdxEntry {
            surt: surt(uri),
            timestamp,
            url: uri.to_string(),
            mime: if kind == "revisit" {
                "warc/revisit".to_string()
            } else {
                http.mime
            },
            status: status_text(http.status),
            digest: digest.strip_prefix("sha1:").unwrap_or(digest).to_string(),
            length,
            offset,
            filename: filename.to_string(),
        })
    }
}

/// A status code as CDXJ writes it.
pub(super) fn status_text(status: u16) -> String {
    if status == 0 {
        "-".to_string()
    } else {
        status.to_string()
    }
}

/// The SURT form of a URI, as the web archive indexes key it: scheme dropped, host labels
/// reversed and comma-joined (an IP address kept as it is) with a leading `www` label dropped,
/// the port kept unless it is the scheme's default, `)`, then path and query lower-cased with
/// the query's parameters sorted. `http://www.Example.com:8080/A?b=1&a=2` ->
/// `com,example:8080)/a?a=2&b=1`. A URI that does not parse is kept lower-cased.
pub fn surt(uri: &str) -> String {
    let Ok(u) = url::Url::parse(uri) else {
        return uri.to_ascii_lowercase();
    };
    let mut out = String::new();
    match u.host() {
        Some(url::Host::Domain(d)) => {
            let d = d.to_ascii_lowercase();
            let mut labels: Vec<&str> = d.trim_end_matches('.').split('.').collect();
            if labels.len() > 2 && labels[0].starts_with("www") {
                labels.remove(0);
            }
            labels.reverse();
            out.push_str(&labels.join(","));
        }
        Some(url::Host::Ipv4(a)) => out.push_str(&a.to_string()),
        Some(url::Host::Ipv6(a)) => out.push_str(&format!("[{a}]")),
        None => {}
    }
    if let Some(port) = u.port() {
        out.push_str(&format!(":{port}"));
    }
    out.push(')');
    out.push_str(&u.path().to_ascii_lowercase());
    if let Some(q) = u.query().filter(|q| !q.is_empty()) {
        let mut params: Vec<String> = q.split('&').map(str::to_ascii_lowercase).collect();
        params.sort();
        out.push('?');
        out.push_str(&params.join("&"));
    }
    out
}
