//! MS-FSCADM conformance: Python's unmodified `xmlrpc.client` (tests/conformance/
//! conformance_fscadm.py) against real roles on loopback. Each test names the section it
//! checks; docs/conformance.md lists them per method.

#[allow(unused_imports)]
use crate::conformance_fscmt::{config_xml, multinode, node, Peer};
