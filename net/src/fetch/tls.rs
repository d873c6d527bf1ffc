//! HTTPS: the rustls client configuration (ring provider: it builds with a C compiler alone,
//! where aws-lc-rs wants cmake) and the per-connection session.

use std::io;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore};

use super::FetchError;

/// The shared client configuration: webpki roots plus `extra`, TLS 1.2 and 1.3, ALPN
/// `http/1.1`, rustls's in-memory session cache (resumption makes reconnects cheap).
pub(super) fn client_config(extra: &[CertificateDer<'static>]) -> io::Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    for cert in extra {
        roots.add(cert.clone()).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("extra root certificate: {e}"),
            )
        })?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| io::Error::other(format!("TLS configuration: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A client session for `url`'s host. An IP-literal host gets no SNI (rustls sends none for an
/// `IpAddress` server name) and is verified against the certificate's IP addresses.
pub(super) fn session(
    config: &Arc<ClientConfig>,
    url: &url::Url,
) -> Result<ClientConnection, FetchError> {
    let name = match url.host() {
        Some(url::Host::Domain(d)) => ServerName::try_from(d.to_string())
            .map_err(|e| FetchError::Tls(format!("server name {d:?}: {e}")))?,
        Some(url::Host::Ipv4(ip)) => ServerName::IpAddress(std::net::IpAddr::V4(ip).into()),
        Some(url::Host::Ipv6(ip)) => ServerName::IpAddress(std::net::IpAddr::V6(ip).into()),
        None => return Err(FetchError::InvalidRequest("URL without host".into())),
    };
    ClientConnection::new(config.clone(), name).map_err(|e| FetchError::Tls(e.to_string()))
}
