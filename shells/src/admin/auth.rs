//! Who may use an administrative port: a token given as `Authorization: Bearer <token>` or as
//! the password of HTTP basic authentication (any user name), checked for every request in the
//! server's one dispatch ([`super::server`]), whatever its path: XML-RPC at /RPC2 and every
//! other route (the metrics and dashboard views). A read-only token allows the views (GET and
//! HEAD) and the XML-RPC methods that change nothing ([`read_only_method`]).
//!
//! A port bound off loopback refuses to start without a token ([`AdminAuth::check_listen`]);
//! on loopback the token is optional, and enforced when given. A route that carries its own
//! proof (IndexNow: the key file on the submitted host) is open to everyone
//! ([`super::server::Route::public`]).
//!
//! ```
//! use crawlfleet_shells::admin::auth::{Access, AdminAuth};
//! let auth = AdminAuth::new(Some("s3cret".into()), Some("look".into())).unwrap();
//! assert_eq!(auth.access(Some("Bearer s3cret")), Ok(Access::Full));
//! // Basic "admin:look", any user name.
//! assert_eq!(auth.access(Some("Basic YWRtaW46bG9vaw==")), Ok(Access::ReadOnly));
//! assert!(auth.access(None).is_err());
//! assert!(auth.check_listen("0.0.0.0:14101".parse().unwrap()).is_ok());
//! assert!(AdminAuth::default().check_listen("0.0.0.0:14101".parse().unwrap()).is_err());
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;

/// Who may use an administrative port, and over what (README "Admin"): tokens and TLS.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct AdminAccess {
    /// A file holding the token every request to the administrative port must carry, as
    /// `Authorization: Bearer TOKEN` or as the password of HTTP basic authentication (any user
    /// name). Required when the port is not on loopback.
    #[arg(long, value_name = "FILE")]
    pub admin_token_file: Option<PathBuf>,
    /// A file holding a read-only token: the views (GET: /metrics, the dashboard) and the
    /// XML-RPC methods that change nothing (Get..., Is..., CollectionGet..., system.*).
    #[arg(long, value_name = "FILE")]
    pub admin_readonly_token_file: Option<PathBuf>,
    /// Serve the administrative port over TLS (HTTPS) with this certificate chain (PEM, the
    /// server's certificate first); with --admin-tls-key.
    #[arg(long, value_name = "FILE", requires = "admin_tls_key")]
    pub admin_tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --admin-tls-cert.
    #[arg(long, value_name = "FILE", requires = "admin_tls_cert")]
    pub admin_tls_key: Option<PathBuf>,
}

/// The realm the challenges name.
pub const REALM: &str = "crawlfleet admin";

/// What a request may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Everything.
    Full,
    /// The views and the methods that change nothing.
    ReadOnly,
}

/// Why a request was refused (answered 401 with the challenges).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No `Authorization` header.
    Missing,
    /// A scheme other than Bearer and Basic, or a Basic value that is not base64 `user:pass`.
    Malformed,
    /// A token that is not one of the port's.
    Wrong,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::Missing => "no credentials",
            Refusal::Malformed => "credentials that are neither Bearer nor Basic",
            Refusal::Wrong => "a wrong token",
        })
    }
}

/// The tokens of one administrative port (none: every request has full access), and the TLS
/// it speaks, if any ([`super::tls`]).
#[derive(Clone, Debug, Default)]
pub struct AdminAuth {
    full: Option<String>,
    read_only: Option<String>,
    tls: Option<Arc<rustls::ServerConfig>>,
}

/// Reads a token file: its content, white space trimmed, must be a token of at least 16
/// printable ASCII characters without spaces (what a header carries unchanged).
fn read_token(path: &Path, flag: &str) -> Result<String, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("{flag} {}: {e}", path.display()))?;
    let token = text.trim();
    if token.len() < 16 || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "{flag} {}: a token is at least 16 printable ASCII characters without spaces",
            path.display()
        ));
    }
    Ok(token.to_string())
}

/// Compares in time that depends on the lengths only, not on where the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl AdminAuth {
    /// A port with these tokens; a read-only token needs a full one beside it.
    pub fn new(full: Option<String>, read_only: Option<String>) -> Result<AdminAuth, String> {
        if full.is_none() && read_only.is_some() {
            return Err(
                "a read-only admin token needs an admin token too (--admin-token-file)".into(),
            );
        }
        if full.is_some() && full == read_only {
            return Err("the read-only admin token must differ from the admin token".into());
        }
        Ok(AdminAuth {
            full,
            read_only,
            tls: None,
        })
    }

    /// The same tokens over TLS.
    pub fn with_tls(self, config: Arc<rustls::ServerConfig>) -> AdminAuth {
        AdminAuth {
            tls: Some(config),
            ..self
        }
    }

    /// The port's TLS configuration, if it speaks TLS.
    pub fn tls(&self) -> Option<&Arc<rustls::ServerConfig>> {
        self.tls.as_ref()
    }

    /// The tokens of `--admin-token-file` and `--admin-readonly-token-file`.
    pub fn from_files(full: Option<&Path>, read_only: Option<&Path>) -> Result<AdminAuth, String> {
        AdminAuth::new(
            full.map(|p| read_token(p, "--admin-token-file"))
                .transpose()?,
            read_only
                .map(|p| read_token(p, "--admin-readonly-token-file"))
                .transpose()?,
        )
    }

    /// The full-access token, if any.
    pub fn token(&self) -> Option<&str> {
        self.full.as_deref()
    }

    /// Whether requests need a token.
    pub fn required(&self) -> bool {
        self.full.is_some()
    }

    /// Refuses a port bound off loopback (a wildcard address included) without a token.
    pub fn check_listen(&self, addr: SocketAddr) -> Result<(), String> {
        if self.required() || addr.ip().is_loopback() {
            return Ok(());
        }
        Err(format!(
            "the administrative port {addr} is not on loopback: give it a token with \
             --admin-token-file FILE (anyone who reaches it could change the crawl otherwise)"
        ))
    }

    /// What a request with this `Authorization` header value may do.
    pub fn access(&self, authorization: Option<&str>) -> Result<Access, Refusal> {
        let Some(full) = &self.full else {
            return Ok(Access::Full);
        };
        let value = authorization.ok_or(Refusal::Missing)?.trim();
        let (scheme, rest) = value.split_once(' ').ok_or(Refusal::Malformed)?;
        let token: Vec<u8> = if scheme.eq_ignore_ascii_case("bearer") {
            rest.trim().as_bytes().to_vec()
        } else if scheme.eq_ignore_ascii_case("basic") {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(rest.trim())
                .map_err(|_| Refusal::Malformed)?;
            // RFC 7617 2: user-id ":" password; the user name is not checked.
            let colon = decoded
                .iter()
                .position(|&b| b == b':')
                .ok_or(Refusal::Malformed)?;
            decoded[colon + 1..].to_vec()
        } else {
            return Err(Refusal::Malformed);
        };
        if same(&token, full.as_bytes()) {
            return Ok(Access::Full);
        }
        match &self.read_only {
            Some(ro) if same(&token, ro.as_bytes()) => Ok(Access::ReadOnly),
            _ => Err(Refusal::Wrong),
        }
    }

    /// The `WWW-Authenticate` challenges of a 401 (RFC 9110 11.6.1): Basic first, which a
    /// browser asks the user for, then Bearer (RFC 6750 3).
    pub fn challenges() -> [(&'static str, String); 2] {
        [
            (
                "WWW-Authenticate",
                format!("Basic realm=\"{REALM}\", charset=\"UTF-8\""),
            ),
            ("WWW-Authenticate", format!("Bearer realm=\"{REALM}\"")),
        ]
    }
}

/// Whether an XML-RPC method only reads (allowed with a read-only token): the FSCADM getters
/// (`Get...`, `Is...`, `CollectionGet...`, 2.2.8-2.2.10), the introspection methods and the
/// distributor's `search`.
pub fn read_only_method(method: &str) -> bool {
    method.starts_with("Get")
        || method.starts_with("Is")
        || method.starts_with("CollectionGet")
        || method.starts_with("system.")
        || method == "search"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user: &str, pass: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"))
        )
    }

    #[test]
    fn tokens_are_checked_as_bearer_and_basic() {
        let a = AdminAuth::new(
            Some("full-token-0123456789".into()),
            Some("ro-token-0123456789".into()),
        )
        .unwrap();
        assert_eq!(
            a.access(Some("Bearer full-token-0123456789")),
            Ok(Access::Full)
        );
        assert_eq!(
            a.access(Some("bearer  ro-token-0123456789")),
            Ok(Access::ReadOnly)
        );
        assert_eq!(
            a.access(Some(&basic("x", "full-token-0123456789"))),
            Ok(Access::Full)
        );
        assert_eq!(
            a.access(Some(&basic("", "ro-token-0123456789"))),
            Ok(Access::ReadOnly)
        );
        assert_eq!(
            a.access(Some(&basic("full-token-0123456789", ""))),
            Err(Refusal::Wrong)
        );
        assert_eq!(
            a.access(Some("Bearer full-token-012345678")),
            Err(Refusal::Wrong)
        );
        assert_eq!(a.access(Some("Digest abc")), Err(Refusal::Malformed));
        assert_eq!(a.access(Some("Basic !!!")), Err(Refusal::Malformed));
        assert_eq!(a.access(Some("Bearer")), Err(Refusal::Malformed));
        assert_eq!(a.access(None), Err(Refusal::Missing));
        // Without tokens everything is open, and only loopback may be bound.
        let open = AdminAuth::default();
        assert_eq!(open.access(None), Ok(Access::Full));
        assert!(open.check_listen("127.0.0.1:1".parse().unwrap()).is_ok());
        assert!(open.check_listen("[::1]:1".parse().unwrap()).is_ok());
        assert!(open.check_listen("0.0.0.0:1".parse().unwrap()).is_err());
        assert!(open.check_listen("192.0.2.1:1".parse().unwrap()).is_err());
        assert!(AdminAuth::new(None, Some("ro-token-0123456789".into())).is_err());
        assert!(AdminAuth::new(
            Some("same-token-0123456".into()),
            Some("same-token-0123456".into())
        )
        .is_err());
    }

    #[test]
    fn read_only_methods_change_nothing() {
        for m in [
            "GetLogLevel",
            "IsDistributed",
            "CollectionGetStatistics",
            "system.listMethods",
            "search",
        ] {
            assert!(read_only_method(m), "{m}");
        }
        for m in [
            "SetLogLevel",
            "CollectionSuspend",
            "AddURIs",
            "CollectionAdd",
            "CollectionRefetch",
        ] {
            assert!(!read_only_method(m), "{m}");
        }
    }

    #[test]
    fn token_files_are_trimmed_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good");
        std::fs::write(&good, "  abcdefghijklmnopqrstuvwxyz\n").unwrap();
        let short = dir.path().join("short");
        std::fs::write(&short, "abc\n").unwrap();
        let a = AdminAuth::from_files(Some(&good), None).unwrap();
        assert_eq!(
            a.access(Some("Bearer abcdefghijklmnopqrstuvwxyz")),
            Ok(Access::Full)
        );
        assert!(AdminAuth::from_files(Some(&short), None).is_err());
        assert!(AdminAuth::from_files(Some(&dir.path().join("none")), None).is_err());
    }
}
