//! HTTPS against a loopback rustls server whose certificate a test CA (made by rcgen) signed.

use std::io::{BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};

use super::*;

/// A CA certificate and a server config with a certificate it signed for `localhost` and
/// 127.0.0.1.
fn test_pki() -> (CertificateDer<'static>, Arc<ServerConfig>) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let params =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    (ca_cert.der().clone(), Arc::new(config))
}

/// A keep-alive HTTPS server answering every request with its path.
fn tls_server(config: Arc<ServerConfig>) -> Server {
    Server::start(
        TcpListener::bind("127.0.0.1:0").unwrap(),
        move |_, stream| {
            let Ok(conn) = ServerConnection::new(config.clone()) else {
                return;
            };
            let mut r = BufReader::new(StreamOwned::new(conn, stream));
            while let Some(head) = read_head(&mut r) {
                let path = head.split(' ').nth(1).unwrap_or("").to_string();
                let w = r.get_mut();
                if w.write_all(&ok_response(path.as_bytes()))
                    .and_then(|()| w.flush())
                    .is_err()
                {
                    return;
                }
            }
        },
    )
}

#[test]
fn https_with_a_test_ca_and_keep_alive() {
    let (ca, server_config) = test_pki();
    let s = tls_server(server_config);
    let opts = FetcherOptions {
        extra_roots: vec![ca],
        ..Default::default()
    };
    let f = Fetcher::spawn(opts).unwrap();
    let url = |p: &str| format!("https://localhost:{}{p}", s.addr.port());
    let a = fetch_ok(&f, request(1, &url("/one"), s.addr));
    assert_eq!((a.status, a.body.as_slice()), (200, &b"/one"[..]));
    let b = fetch_ok(&f, request(2, &url("/two"), s.addr));
    assert_eq!(b.body, b"/two");
    assert!(b.reused_connection);
    assert_eq!(s.accepted(), 1);
    // An IP-literal host (no SNI) is checked against the certificate's IP address.
    let c = fetch_ok(
        &f,
        request(
            3,
            &format!("https://127.0.0.1:{}/ip", s.addr.port()),
            s.addr,
        ),
    );
    assert_eq!(c.body, b"/ip");
}

#[test]
fn https_with_an_untrusted_certificate_is_a_tls_error() {
    let (_, server_config) = test_pki();
    let s = tls_server(server_config);
    let f = fetcher(); // webpki roots only
    let res = fetch(
        &f,
        request(1, &format!("https://localhost:{}/", s.addr.port()), s.addr),
    );
    assert!(
        matches!(res.result, Err(FetchError::Tls(_))),
        "{:?}",
        res.result
    );
}

#[test]
fn https_name_mismatch_is_a_tls_error() {
    let (ca, server_config) = test_pki();
    let s = tls_server(server_config);
    let f = Fetcher::spawn(FetcherOptions {
        extra_roots: vec![ca],
        ..Default::default()
    })
    .unwrap();
    let res = fetch(
        &f,
        request(1, &format!("https://other.test:{}/", s.addr.port()), s.addr),
    );
    assert!(
        matches!(res.result, Err(FetchError::Tls(_))),
        "{:?}",
        res.result
    );
}
