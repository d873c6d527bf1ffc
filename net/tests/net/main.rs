//! Integration tests of the event loop over real loopback sockets. One test binary; each module
//! covers one behaviour. Every wait is bounded (see `util::WAIT`); nothing asserts on timing.

mod backpressure;
mod bad_peers;
mod coalescing;
mod drained;
mod http;
mod large;
mod lifecycle;
mod limits;
mod many;
mod priority;
mod reconnect;
mod timers;
mod tls;
mod util;
