//! A small blocking XML-RPC client over `std::net::TcpStream` (one request per connection):
//! what `crawlfleet admin` and the multinode scheduler's SetLogLevel forwarding use.

use std::fmt;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use crawlfleet_core::xmlrpc::{self, Fault, Limits, Value, XmlRpcError};

/// Seconds to connect, and to wait for each read or write.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Why a call got no answer.
#[derive(Debug)]
pub enum ClientError {
    /// The address does not resolve or the connection failed.
    Connect(String),
    /// Reading or writing failed.
    Io(std::io::Error),
    /// The answer is not an HTTP response.
    Http(String),
    /// The HTTP status is not 200.
    Status(u16, String),
    /// The body is not an XML-RPC response.
    Body(XmlRpcError),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Connect(e) => write!(f, "cannot connect: {e}"),
            ClientError::Io(e) => write!(f, "connection: {e}"),
            ClientError::Http(e) => write!(f, "bad HTTP response: {e}"),
            ClientError::Status(s, body) => write!(f, "HTTP status {s}: {}", body.trim()),
            ClientError::Body(e) => write!(f, "bad response body: {e}"),
        }
    }
}

impl std::error::Error for ClientError {}

/// Calls `method` at `server` ("host:port"): the value, or the server's fault.
pub fn call(
    server: &str,
    method: &str,
    params: &[Value],
) -> Result<Result<Value, Fault>, ClientError> {
    call_with(server, method, params, None)
}

/// [`call`] carrying `token` as `Authorization: Bearer` (an administrative port that wants
/// one: [`super::auth`]).
pub fn call_with(
    server: &str,
    method: &str,
    params: &[Value],
    token: Option<&str>,
) -> Result<Result<Value, Fault>, ClientError> {
    call_over(server, method, params, token, None)
}

/// The client configuration of an administrative port served over TLS whose certificate (or
/// its issuer) is in the PEM file `ca`.
pub fn tls_trusting(ca: &std::path::Path) -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    let certs = rustls::pki_types::CertificateDer::pem_file_iter(ca)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("--tls-ca {}: {e}", ca.display()))?;
    for c in certs {
        roots
            .add(c)
            .map_err(|e| format!("--tls-ca {}: {e}", ca.display()))?;
    }
    if roots.is_empty() {
        return Err(format!("--tls-ca {}: no certificate in it", ca.display()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS configuration: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// A socket, or a TLS session over one.
trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

/// [`call_with`], over TLS when `tls` is given (the server's name is the host of `server`).
pub fn call_over(
    server: &str,
    method: &str,
    params: &[Value],
    token: Option<&str>,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<Result<Value, Fault>, ClientError> {
    let addr = server
        .to_socket_addrs()
        .map_err(|e| ClientError::Connect(format!("{server}: {e}")))?
        .next()
        .ok_or_else(|| ClientError::Connect(format!("{server} does not resolve")))?;
    let s = TcpStream::connect_timeout(&addr, TIMEOUT)
        .map_err(|e| ClientError::Connect(format!("{server}: {e}")))?;
    s.set_read_timeout(Some(TIMEOUT)).map_err(ClientError::Io)?;
    s.set_write_timeout(Some(TIMEOUT))
        .map_err(ClientError::Io)?;
    let mut s: Box<dyn Stream> = match tls {
        None => Box::new(s),
        Some(config) => {
            let host = server.rsplit_once(':').map_or(server, |(h, _)| h);
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let name = rustls::pki_types::ServerName::try_from(host.to_string())
                .map_err(|e| ClientError::Connect(format!("{server}: {e}")))?;
            let conn = rustls::ClientConnection::new(Arc::clone(config), name)
                .map_err(|e| ClientError::Connect(format!("{server}: {e}")))?;
            Box::new(rustls::StreamOwned::new(conn, s))
        }
    };
    let body = xmlrpc::encode_call(method, params);
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "POST /RPC2 HTTP/1.1\r\nHost: {server}\r\nUser-Agent: crawlfleet-admin\r\n{auth}Content-Type: text/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).map_err(ClientError::Io)?;
    s.write_all(&body).map_err(ClientError::Io)?;
    let mut buf = Vec::new();
    let limits = Limits::default();
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut headers);
        if let httparse::Status::Complete(n) = resp
            .parse(&buf)
            .map_err(|e| ClientError::Http(e.to_string()))?
        {
            let len = resp
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .and_then(|h| {
                    std::str::from_utf8(h.value)
                        .ok()?
                        .trim()
                        .parse::<usize>()
                        .ok()
                });
            let code = resp.code.unwrap_or(0);
            let complete = len.is_some_and(|l| buf.len() >= n + l);
            if complete || len.is_none_or(|l| l > limits.max_body) {
                let end = len.map_or(buf.len(), |l| (n + l).min(buf.len()));
                let body = &buf[n..end];
                if code != 200 {
                    return Err(ClientError::Status(
                        code,
                        String::from_utf8_lossy(body).into(),
                    ));
                }
                return xmlrpc::parse_response(body, &limits).map_err(ClientError::Body);
            }
        }
        let mut chunk = [0u8; 16 << 10];
        match s.read(&mut chunk) {
            Ok(0) => {
                if buf.is_empty() {
                    return Err(ClientError::Http("the server closed the connection".into()));
                }
                // Connection: close without Content-Length: the body ends here.
                let mut headers = [httparse::EMPTY_HEADER; 64];
                let mut resp = httparse::Response::new(&mut headers);
                return match resp.parse(&buf) {
                    Ok(httparse::Status::Complete(n)) if resp.code == Some(200) => {
                        xmlrpc::parse_response(&buf[n..], &limits).map_err(ClientError::Body)
                    }
                    Ok(httparse::Status::Complete(n)) => Err(ClientError::Status(
                        resp.code.unwrap_or(0),
                        String::from_utf8_lossy(&buf[n..]).into(),
                    )),
                    _ => Err(ClientError::Http("truncated response".into())),
                };
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ClientError::Io(e)),
        }
    }
}
