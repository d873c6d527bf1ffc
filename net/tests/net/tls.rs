//! TLS on accepted connections (`Builder::tls`): a rustls client talking frames through the
//! loop's server sessions, a large exchange included (records held while the socket is full
//! leave on the writable edge), a clean close_notify when the role closes, and a peer that does
//! not speak TLS closed with an error.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use crawlfleet_net::{Event, EventLoop, Priority};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};

use crate::util;

/// A server configuration for a fresh self-signed certificate of 127.0.0.1, and the
/// certificate for the client to trust.
fn server_config() -> (Arc<rustls::ServerConfig>, CertificateDer<'static>) {
    let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = ck.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.signing_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .unwrap();
    (Arc::new(config), cert)
}

fn client(
    addr: std::net::SocketAddr,
    trust: CertificateDer<'static>,
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(trust).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::IpAddress(addr.ip().into());
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    rustls::StreamOwned::new(conn, util::connect(addr))
}

#[test]
fn frames_go_both_ways_through_the_tls_sessions() {
    util::init_logs();
    let (config, cert) = server_config();
    let lp = EventLoop::builder()
        .listen(util::loopback0())
        .tls(config)
        .spawn()
        .unwrap();
    let (h, ev) = (&lp.handle, &lp.events);
    let tls = client(lp.local_addrs[0], cert);
    // Small frames and large ones (1 MiB each: more than rustls and the socket buffer hold).
    let frames: Vec<Vec<u8>> = (0..40)
        .map(|i| {
            util::frame(
                1,
                i,
                if i % 8 == 7 {
                    1 << 20
                } else {
                    100 + i as usize
                },
                Priority::Normal,
            )
        })
        .collect();
    let all: Vec<u8> = frames.concat();
    let writer = {
        let all = all.clone();
        let mut w = tls;
        std::thread::spawn(move || {
            w.write_all(&all).unwrap();
            w.flush().unwrap();
            let mut back = vec![0u8; all.len()];
            w.read_exact(&mut back).unwrap();
            (w, back)
        })
    };
    // The echo role: every frame goes back as it came.
    let mut echoed = 0;
    let mut conn = None;
    while echoed < all.len() {
        match ev.recv_timeout(util::WAIT).expect("events") {
            Event::Frames(batch) => {
                conn = Some(batch.conn());
                echoed += batch.data().len();
                h.send(batch.conn(), Priority::Normal, batch.data().to_vec())
                    .unwrap();
            }
            Event::Closed { reason, .. } => panic!("closed: {reason:?}"),
            _ => {}
        }
    }
    let (mut w, back) = writer.join().unwrap();
    assert!(back == all, "the frames came back unchanged");
    // The role closes: the client reads a clean end (close_notify), not a truncation.
    h.close(conn.unwrap()).unwrap();
    let mut rest = Vec::new();
    assert_eq!(w.read_to_end(&mut rest).unwrap(), 0);
    drop(w);
    // A peer that does not speak TLS is closed with an error; the loop serves on.
    let mut plain = util::connect(lp.local_addrs[0]);
    plain.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    util::echo_until(h, ev, |e| matches!(e, Event::Closed { .. }));
    let mut buf = [0u8; 64];
    let _ = plain.read(&mut buf);
    util::stop(lp);
}
