//! crawlfleet's pure data layer: the marshal codec the FAST crawler protocols are written in,
//! FSCMT framing and the FSCMT message model. No sockets and no threads live here.
#![deny(missing_docs)]

pub mod frame;
pub mod marshal;
