//! Listening sockets bound ahead of the role that serves them, in the same process.
//!
//! A program that starts several roles on threads (`crawlfleet up`) picks their addresses
//! first and starts them one after another. Picking a port by binding and closing it leaves
//! a window in which another program can take it, and the role then fails to bind. Holding
//! the picked socket here closes the window: the role's bind ([`bind`], which
//! [`Builder::listen`](crate::Builder::listen) uses) takes the held socket instead of binding
//! anew, so the port is never free between the pick and the role.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Mutex, OnceLock};

fn held() -> &'static Mutex<HashMap<SocketAddr, TcpListener>> {
    static HELD: OnceLock<Mutex<HashMap<SocketAddr, TcpListener>>> = OnceLock::new();
    HELD.get_or_init(Mutex::default)
}

/// Holds `listener` until a role in this process binds its address; the address.
pub fn hold(listener: TcpListener) -> io::Result<SocketAddr> {
    let addr = listener.local_addr()?;
    held()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(addr, listener);
    Ok(addr)
}

/// Binds `addr` (port 0: a free port) and holds the socket ([`hold`]); the address bound.
pub fn bind_and_hold(addr: SocketAddr) -> io::Result<SocketAddr> {
    hold(TcpListener::bind(addr)?)
}

/// The socket held for `addr`, if one is (it is no longer held then).
pub fn take(addr: SocketAddr) -> Option<TcpListener> {
    held()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&addr)
}

/// A listener on `addr`: the one held for it, else a new bind.
pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    match take(addr) {
        Some(l) => Ok(l),
        None => TcpListener::bind(addr),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_port_stays_taken_until_its_role_binds_it() {
        let addr = bind_and_hold("127.0.0.1:0".parse().unwrap()).unwrap();
        // Nobody else gets the port while it is held.
        assert!(TcpListener::bind(addr).is_err());
        // The role's bind gets the held socket, which accepts; it is held no longer.
        let l = bind(addr).unwrap();
        assert!(take(addr).is_none());
        assert_eq!(l.local_addr().unwrap(), addr);
        let _c = std::net::TcpStream::connect(addr).unwrap();
        assert!(l.accept().is_ok());
        // Without a held socket, bind binds: here the port is in use, so it fails.
        assert!(bind(addr).is_err());
    }
}
