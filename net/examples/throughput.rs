//! A rough throughput measurement of the event loop: clients on loopback send FSCMT frames in
//! pipelined windows to an echo role and read them back.
//!
//! `cargo run -p crawlfleet-net --release --example throughput -- [conns] [body bytes] [seconds]`
//! (defaults: 64 connections, 100-byte bodies, 5 seconds). Criterion benches live in `benches/`;
//! this is only a quick look at frames per second through one loop thread.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crawlfleet_core::frame::{self, Priority};
use crawlfleet_core::marshal::Value;
use crawlfleet_net::{Event, EventLoop};

/// Frames written per connection before reading their echoes.
const WINDOW: usize = 64;
const CLIENT_THREADS: usize = 4;

fn arg(i: usize, default: u64) -> u64 {
    std::env::args()
        .nth(i)
        .map(|a| a.parse().expect("numeric argument"))
        .unwrap_or(default)
}

fn main() {
    let conns = arg(1, 64) as usize;
    let body = arg(2, 100) as usize;
    let secs = arg(3, 5);

    let lp = EventLoop::builder()
        .listen("127.0.0.1:0".parse().expect("address"))
        .spawn()
        .expect("spawn event loop");
    let addr = lp.local_addrs[0];
    let role = {
        let (handle, events) = (lp.handle.clone(), lp.events.clone());
        std::thread::spawn(move || {
            let mut frames = 0u64;
            while let Ok(ev) = events.recv() {
                if let Event::Frames(batch) = ev {
                    frames += batch.len() as u64;
                    // Echo the whole batch in one send: the frames are already framed.
                    let _ = handle.send(batch.conn(), Priority::Normal, batch.into_data());
                }
            }
            frames
        })
    };

    let mut one = Vec::new();
    let pad = vec![b'x'; body];
    frame::encode_dict(
        &vec![(Value::bytes(b"p"), Value::bytes(&pad))],
        Priority::Normal,
        &mut one,
    );
    let window: Vec<u8> = one
        .iter()
        .copied()
        .cycle()
        .take(one.len() * WINDOW)
        .collect();

    let deadline = Instant::now() + Duration::from_secs(secs);
    let start = Instant::now();
    let threads: Vec<_> = (0..CLIENT_THREADS.min(conns))
        .map(|t| {
            let n = conns / CLIENT_THREADS.min(conns)
                + usize::from(t < conns % CLIENT_THREADS.min(conns));
            let window = window.clone();
            std::thread::spawn(move || {
                let mut peers: Vec<TcpStream> = (0..n)
                    .map(|_| TcpStream::connect(addr).expect("connect"))
                    .collect();
                let mut back = vec![0u8; window.len()];
                let mut frames = 0u64;
                while Instant::now() < deadline {
                    for p in &mut peers {
                        p.write_all(&window).expect("write");
                    }
                    for p in &mut peers {
                        p.read_exact(&mut back).expect("read");
                        frames += WINDOW as u64;
                    }
                }
                frames
            })
        })
        .collect();
    let echoed: u64 = threads.into_iter().map(|t| t.join().expect("client")).sum();
    let elapsed = start.elapsed().as_secs_f64();
    lp.handle.shutdown().expect("shutdown");
    lp.join.join().expect("loop thread").expect("loop");
    let received = role.join().expect("role");
    let mb = (echoed as f64 * one.len() as f64) / elapsed / 1e6;
    println!(
        "{conns} connections, {}-byte frames: {:.0} frames/s echoed ({mb:.1} MB/s each way); \
         the role saw {received} frames",
        one.len(),
        echoed as f64 / elapsed
    );
}
