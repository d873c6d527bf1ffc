//! HTTP on the event loop: pipelined requests arrive as one batch in order; a request the
//! framing refuses arrives last, flagged with its status, and nothing after it is delivered,
//! so the role can answer it and close.

use std::io::{Read, Write};

use crawlfleet_net::http::{self, HttpFraming, Request};
use crawlfleet_net::{CloseReason, Event, EventLoop, Priority};

use crate::util;

#[test]
fn pipelined_requests_then_a_refusal_answered_before_the_close() {
    util::init_logs();
    let lp = EventLoop::builder()
        .listen(util::loopback0())
        .framing(HttpFraming::new(64))
        .spawn()
        .unwrap();
    let mut peer = util::connect(lp.local_addrs[0]);
    let mut out =
        b"GET /1 HTTP/1.1\r\n\r\nPOST /2 HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi".to_vec();
    // Over the 64-byte body limit, then bytes that must never be delivered.
    out.extend_from_slice(b"POST /3 HTTP/1.1\r\nContent-Length: 65\r\n\r\nGET /4 HTTP/1.1\r\n\r\n");
    peer.write_all(&out).unwrap();
    let (mut paths, mut refused) = (Vec::new(), None);
    let conn = loop {
        match util::next_event(&lp.events) {
            Event::Frames(batch) => {
                for i in 0..batch.len() {
                    if let Some(r) = batch.refusal(i) {
                        refused = Some(r.status);
                        continue;
                    }
                    let req = Request::parse(batch.raw(i).unwrap()).unwrap();
                    assert_eq!(batch.get(i).unwrap().1, req.body);
                    paths.push(req.path.to_string());
                }
                if refused.is_some() {
                    break batch.conn();
                }
            }
            Event::Accepted { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(paths, ["/1", "/2"]);
    assert_eq!(refused, Some(413));
    let mut answer = Vec::new();
    http::write_response(&mut answer, 413, "text/plain", &[], b"too large\n", false);
    lp.handle
        .send(conn, Priority::Normal, answer.clone())
        .unwrap();
    lp.handle.close(conn).unwrap();
    // The answer, then the end of the stream: nothing of GET /4 was answered or delivered.
    let mut got = Vec::new();
    peer.read_to_end(&mut got).unwrap();
    assert_eq!(got, answer);
    drop(peer);
    match util::next_event(&lp.events) {
        Event::Closed { reason, .. } => assert_eq!(reason, CloseReason::LocalClose),
        other => panic!("unexpected {other:?}"),
    }
    util::stop(lp);
}
