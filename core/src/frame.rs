//! FSCMT framing (MS-FSCMT 2.2.1): a 4-byte big-endian length, then a marshal 2-tuple of the
//! message dict and the priority (0 normal, 1 high).

use std::fmt;

use crate::marshal::{self, tag, DecodeError, Decoder, Dict, IntForm, Limits, Value};
use crate::msg::{Message, MessageError};

/// Bytes of the length header.
pub const HEADER_LEN: usize = 4;

/// The priority element of a frame (MS-FSCMT 2.2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Priority {
    /// 0: appended to the send queue.
    Normal,
    /// 1: delivered before queued normal-priority frames.
    High,
}

impl Priority {
    /// The wire integer.
    pub fn as_i64(self) -> i64 {
        match self {
            Priority::Normal => 0,
            Priority::High => 1,
        }
    }

    /// From the wire integer; anything but 0 and 1 is refused.
    pub fn from_i64(v: i64) -> Option<Self> {
        match v {
            0 => Some(Priority::Normal),
            1 => Some(Priority::High),
            _ => None,
        }
    }
}

/// One decoded frame; its strings borrow from the frame bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Frame<'a> {
    /// The priority element.
    pub priority: Priority,
    /// The message dictionary (MS-FSCMT 2.2.1.1), pairs in wire order.
    pub message: Dict<'a>,
}

/// Why a frame was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The length header announces more than the configured maximum frame size.
    TooLarge {
        /// The announced body length.
        len: usize,
        /// The configured maximum.
        limit: usize,
    },
    /// The body is not valid marshal data.
    Marshal(DecodeError),
    /// The body is valid marshal data but not a `(dict, priority)` 2-tuple.
    NotAFrameTuple(&'static str),
    /// The priority element is an integer other than 0 or 1.
    BadPriority(i64),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::TooLarge { len, limit } => {
                write!(f, "frame length {len} exceeds the limit of {limit} bytes")
            }
            FrameError::Marshal(e) => e.fmt(f),
            FrameError::NotAFrameTuple(why) => write!(f, "not a (dict, priority) frame: {why}"),
            FrameError::BadPriority(p) => write!(f, "priority {p} is neither 0 nor 1"),
        }
    }
}

impl std::error::Error for FrameError {}

impl From<DecodeError> for FrameError {
    fn from(e: DecodeError) -> Self {
        FrameError::Marshal(e)
    }
}

/// Cuts one frame off the front of `buf`: `Ok(Some((body, consumed)))` when a whole frame is
/// there, `Ok(None)` when more bytes are needed, an error when the header announces too much
/// (checked before waiting for, or allocating, the body).
#[inline]
pub fn split<'a>(buf: &'a [u8], limits: &Limits) -> Result<Option<(&'a [u8], usize)>, FrameError> {
    let Some(header) = buf.get(..HEADER_LEN) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
    if len > limits.max_size {
        return Err(FrameError::TooLarge {
            len,
            limit: limits.max_size,
        });
    }
    Ok(buf
        .get(HEADER_LEN..HEADER_LEN + len)
        .map(|body| (body, HEADER_LEN + len)))
}

/// Decodes a frame body (the bytes after the length header).
pub fn decode_body<'a>(body: &'a [u8], limits: &Limits) -> Result<Frame<'a>, FrameError> {
    let v = marshal::from_bytes(body, limits)?;
    let Value::Tuple(mut items) = v else {
        return Err(FrameError::NotAFrameTuple("not a tuple"));
    };
    if items.len() != 2 {
        return Err(FrameError::NotAFrameTuple("tuple length is not 2"));
    }
    // Check the elements in wire order, as `scan_body` does, so both report the same error.
    let priority = items.pop();
    let Some(Value::Dict(message)) = items.pop() else {
        return Err(FrameError::NotAFrameTuple("first element is not a dict"));
    };
    let priority = match priority {
        Some(Value::Int(p, _)) => Priority::from_i64(p).ok_or(FrameError::BadPriority(p))?,
        Some(Value::Bool(b)) => Priority::from_i64(b.into()).ok_or(FrameError::BadPriority(0))?,
        _ => return Err(FrameError::NotAFrameTuple("priority is not an integer")),
    };
    Ok(Frame { priority, message })
}

/// Checks a frame body with every check of [`decode_body`] but builds nothing, returning the
/// priority. The event loop runs this on each frame before handing the bytes on.
pub fn scan_body(body: &[u8], limits: &Limits) -> Result<Priority, FrameError> {
    // A duplicate-server message in the canonical layout is valid once the fast reader took it.
    if let Some((priority, _)) = crate::msg::decode_hot(body, limits) {
        return Ok(priority);
    }
    let mut d = Decoder::new(body, limits)?;
    let shape = if body.first() != Some(&tag::TUPLE) {
        Err("not a tuple")
    } else if body.get(1..5) != Some(&2u32.to_le_bytes()[..]) {
        Err("tuple length is not 2")
    } else if body.get(5) != Some(&tag::DICT) {
        Err("first element is not a dict")
    } else {
        Ok(())
    };
    if let Err(why) = shape {
        // Invalid marshal reports its own error first, as in `decode_body`.
        d.skip()?;
        d.finish()?;
        return Err(FrameError::NotAFrameTuple(why));
    }
    let priority = d.pair_skip_first()?;
    d.finish()?;
    match priority {
        Value::Int(p, _) => Priority::from_i64(p).ok_or(FrameError::BadPriority(p)),
        Value::Bool(b) => Priority::from_i64(b.into()).ok_or(FrameError::BadPriority(0)),
        _ => Err(FrameError::NotAFrameTuple("priority is not an integer")),
    }
}

/// Why a frame body is not a valid typed message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MessageFrameError {
    /// The frame itself is invalid.
    Frame(FrameError),
    /// The frame is valid but its dict is not a valid FSCMT message.
    Message(MessageError),
}

impl fmt::Display for MessageFrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MessageFrameError::Frame(e) => e.fmt(f),
            MessageFrameError::Message(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for MessageFrameError {}

/// Most pairs the allocation-free path of [`decode_message`] takes.
const FLAT_PAIRS: usize = 12;

/// Decodes a frame body straight to a typed message. A message whose dict holds only scalars
/// (every PPDUP_* command, keep-alives, DNS requests, ...) is read without allocating: its pairs
/// land in a small array on the stack and the message borrows its strings from `body`. Other
/// messages go through [`decode_body`].
pub fn decode_message<'a>(
    body: &'a [u8],
    limits: &Limits,
) -> Result<(Priority, Message<'a>), MessageFrameError> {
    // PPDUP_ADD and its kin in the canonical layout: read without building values.
    if let Some(hot) = crate::msg::decode_hot(body, limits) {
        return Ok(hot);
    }
    let mut d = Decoder::new(body, limits).map_err(|e| MessageFrameError::Frame(e.into()))?;
    let mut pairs = arrayvec::ArrayVec::<(Value<'a>, Value<'a>), FLAT_PAIRS>::new();
    if let Ok(Some(priority)) = d.flat_frame(&mut pairs) {
        let priority = match priority {
            Value::Int(p, _) => Priority::from_i64(p),
            Value::Bool(b) => Priority::from_i64(b.into()),
            _ => None,
        };
        if let Some(priority) = priority {
            let m = Message::from_dict(&pairs).map_err(MessageFrameError::Message)?;
            return Ok((priority, m));
        }
    }
    let frame = decode_body(body, limits).map_err(MessageFrameError::Frame)?;
    let m = Message::from_dict(&frame.message).map_err(MessageFrameError::Message)?;
    Ok((frame.priority, m))
}

/// Appends a whole frame (header included) carrying `message` and `priority`.
pub fn encode_dict(message: &Dict<'_>, priority: Priority, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER_LEN]);
    out.push(tag::TUPLE);
    out.extend_from_slice(&2u32.to_le_bytes());
    out.push(tag::DICT);
    for (k, v) in message {
        marshal::encode_into(k, out);
        marshal::encode_into(v, out);
    }
    out.push(tag::NULL);
    marshal::encode_into(&Value::Int(priority.as_i64(), IntForm::Auto), out);
    patch_len(out, start);
}

/// Appends a whole frame carrying a typed message.
pub fn encode_message(message: &Message<'_>, priority: Priority, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER_LEN]);
    out.push(tag::TUPLE);
    out.extend_from_slice(&2u32.to_le_bytes());
    message.encode_dict_into(out);
    marshal::encode_into(&Value::Int(priority.as_i64(), IntForm::Auto), out);
    patch_len(out, start);
}

/// Appends a whole frame whose body is the already-encoded marshal value `body`.
pub fn encode_raw_body(body: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
}

fn patch_len(out: &mut [u8], start: usize) {
    let len = (out.len() - start - HEADER_LEN) as u32;
    out[start..start + HEADER_LEN].copy_from_slice(&len.to_be_bytes());
}
