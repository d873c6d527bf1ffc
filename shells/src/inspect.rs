//! `crawlfleet inspect`: FSCMT frames (or bare marshal values) to JSON lines and back.
//!
//! This is the tool an operator points at a packet capture: every frame becomes one readable line,
//! and `--encode` turns lines back into the same bytes, so a capture can be edited and replayed.

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::process::ExitCode;

use crawlfleet_core::frame::{self, FrameError, HEADER_LEN};
use crawlfleet_core::marshal::json::{from_json, hex_decode, hex_encode, to_json, JsonError};
use crawlfleet_core::marshal::{self, DecodeError, Decoder, IntForm, Limits, Value};
use crawlfleet_core::msg::command_of;
use crawlfleet_core::nameserver::{Reply, Request, WireError};
use serde_json::{Map, Value as Json};

use crate::cli::InspectArgs;

/// The link store message terminator (MS-FSWASDR 2.2.1).
pub const WASDR_TERMINATOR: &[u8; 7] = b"...\0\0\0\0";

/// Why inspecting stopped.
#[derive(Debug)]
pub enum InspectError {
    /// Reading the input or writing the output failed.
    Io(io::Error),
    /// Hex input that is not whole hex bytes.
    BadHex,
    /// A frame header announcing more than the limit; the stream cannot be followed past it.
    Frame {
        /// Byte offset of the frame in the input.
        offset: u64,
        /// The failure.
        error: FrameError,
    },
    /// The input ends inside a frame.
    TruncatedFrame {
        /// Byte offset of the frame in the input.
        offset: u64,
        /// The body length its header announces.
        announced: usize,
        /// The body bytes present.
        present: usize,
    },
    /// A bare value that cannot be decoded; the stream cannot be followed past it.
    Raw {
        /// Byte offset of the value in the input.
        offset: u64,
        /// The failure.
        error: DecodeError,
    },
    /// A JSON line that does not describe a frame or value.
    Json {
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        message: String,
    },
}

impl fmt::Display for InspectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InspectError::Io(e) => write!(f, "i/o error: {e}"),
            InspectError::BadHex => write!(f, "input is not hex text"),
            InspectError::Frame { offset, error } => {
                write!(f, "frame at byte {offset}: {error}")
            }
            InspectError::TruncatedFrame {
                offset,
                announced,
                present,
            } => write!(
                f,
                "frame at byte {offset}: header announces {announced} bytes, input ends after {present}"
            ),
            InspectError::Raw { offset, error } => write!(f, "value at byte {offset}: {error}"),
            InspectError::Json { line, message } => write!(f, "line {line}: {message}"),
        }
    }
}

impl std::error::Error for InspectError {}

impl From<io::Error> for InspectError {
    fn from(e: io::Error) -> Self {
        InspectError::Io(e)
    }
}

/// Runs `crawlfleet inspect`. Returns failure (after printing every frame it could) when some
/// frame bodies did not decode.
pub fn run(args: &InspectArgs) -> Result<ExitCode, InspectError> {
    let input: Box<dyn Read> = match args.input.as_deref() {
        None => Box::new(io::stdin().lock()),
        Some(p) if p.as_os_str() == "-" => Box::new(io::stdin().lock()),
        Some(p) => Box::new(File::open(p)?),
    };
    let limits = Limits {
        max_depth: args.max_depth,
        max_size: args.max_frame,
    };
    let mut out = BufWriter::new(io::stdout().lock());
    let result = if args.encode {
        encode(BufReader::new(input), &mut out, args, &limits).map(|()| ExitCode::SUCCESS)
    } else {
        let mut input = input;
        if args.hex || args.raw {
            let mut buf = Vec::new();
            input.read_to_end(&mut buf)?;
            let buf = if args.hex { unhex(&buf)? } else { buf };
            if args.raw {
                print_raw(&buf, &mut out, &limits).map(|()| ExitCode::SUCCESS)
            } else {
                print_frames(&mut &buf[..], &mut out, &limits)
            }
        } else {
            print_frames(&mut BufReader::new(input), &mut out, &limits)
        }
    };
    let result = result.and_then(|code| {
        out.flush()?;
        Ok(code)
    });
    match result {
        // A closed pipe (`| head`) is the reader's choice, not a failure.
        Err(InspectError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        other => other,
    }
}

fn unhex(text: &[u8]) -> Result<Vec<u8>, InspectError> {
    let compact: String = String::from_utf8_lossy(text)
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    hex_decode(&compact).ok_or(InspectError::BadHex)
}

/// The JSON line of one frame body.
pub fn frame_json(body: &[u8], limits: &Limits) -> Result<Json, DecodeError> {
    let v = marshal::from_bytes(body, limits)?;
    let mut line = Map::new();
    match &v {
        // The FSCMT shape, with a canonical priority: shown as priority + message.
        Value::Tuple(t)
            if t.len() == 2
                && matches!(t[0], Value::Dict(_))
                && matches!(t[1], Value::Int(0 | 1, IntForm::Auto)) =>
        {
            let Value::Dict(dict) = &t[0] else {
                unreachable!("matched a dict above")
            };
            line.insert("priority".into(), Json::from(t[1].as_i64().unwrap_or(0)));
            if let Ok(cmd) = command_of(dict) {
                line.insert("command".into(), Json::from(cmd.name()));
            } else if let Some(kind) = nameserver_kind(dict) {
                line.insert("nameserver".into(), Json::from(kind));
            }
            line.insert("message".into(), to_json(&t[0]));
        }
        _ => {
            line.insert("value".into(), to_json(&v));
        }
    }
    Ok(Json::Object(line))
}

/// What a name server frame (docs/nameserver.md) is: `request <method>`, `result` or
/// `exception <name>`; None for a dict that is neither.
fn nameserver_kind(dict: &[(Value<'_>, Value<'_>)]) -> Option<String> {
    match Request::from_dict(dict) {
        Ok(req) => return Some(format!("request {}", req.call.method())),
        // A request with a method the name server does not have is still a request.
        Err((_, WireError::UnknownMethod(m))) => return Some(format!("request {m}")),
        Err(_) => {}
    }
    match Reply::from_dict(dict).ok()?.outcome {
        Ok(_) => Some("result".into()),
        Err(raised) => Some(format!("exception {}", raised.exception)),
    }
}

fn print_frames(
    input: &mut dyn Read,
    out: &mut dyn Write,
    limits: &Limits,
) -> Result<ExitCode, InspectError> {
    let mut offset: u64 = 0;
    let mut failures = 0usize;
    let mut body = Vec::new();
    loop {
        let mut header = [0u8; HEADER_LEN];
        match read_full(input, &mut header)? {
            0 => break,
            n if n < HEADER_LEN => {
                return Err(InspectError::TruncatedFrame {
                    offset,
                    announced: HEADER_LEN,
                    present: n,
                })
            }
            _ => {}
        }
        // The limit is checked before the body is read or allocated.
        let len = match frame::split(&header, limits) {
            Err(error) => return Err(InspectError::Frame { offset, error }),
            Ok(_) => u32::from_be_bytes(header) as usize,
        };
        body.clear();
        body.resize(len, 0);
        let got = read_full(input, &mut body)?;
        if got < len {
            return Err(InspectError::TruncatedFrame {
                offset,
                announced: len,
                present: got,
            });
        }
        match frame_json(&body, limits) {
            Ok(line) => writeln!(out, "{line}")?,
            Err(e) => {
                failures += 1;
                log::error!("frame at byte {offset} ({len} bytes): {e}");
            }
        }
        offset += (HEADER_LEN + len) as u64;
    }
    if failures > 0 {
        log::error!("{failures} frame(s) could not be decoded");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn read_full(input: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn print_raw(buf: &[u8], out: &mut dyn Write, limits: &Limits) -> Result<(), InspectError> {
    let mut pos = 0;
    while pos < buf.len() {
        let raw_err = |error| InspectError::Raw {
            offset: pos as u64,
            error,
        };
        let mut d = Decoder::new(&buf[pos..], limits).map_err(raw_err)?;
        let v = d.value().map_err(|mut e| {
            e.offset += pos;
            raw_err(e)
        })?;
        pos += d.offset();
        let mut line = Map::new();
        line.insert("value".into(), to_json(&v));
        if buf[pos..].starts_with(WASDR_TERMINATOR) {
            line.insert("terminator".into(), Json::Bool(true));
            pos += WASDR_TERMINATOR.len();
        }
        writeln!(out, "{}", Json::Object(line))?;
    }
    Ok(())
}

fn encode(
    input: impl BufRead,
    out: &mut dyn Write,
    args: &InspectArgs,
    limits: &Limits,
) -> Result<(), InspectError> {
    for (i, line) in input.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let bad = |message: String| InspectError::Json {
            line: i + 1,
            message,
        };
        let j: Json = serde_json::from_str(&line).map_err(|e| bad(e.to_string()))?;
        let bytes = line_bytes(&j, args.raw).map_err(|e| bad(e.to_string()))?;
        if !args.raw && bytes.len() - HEADER_LEN > limits.max_size {
            return Err(bad(format!(
                "frame of {} bytes exceeds the limit of {}",
                bytes.len() - HEADER_LEN,
                limits.max_size
            )));
        }
        if args.hex {
            writeln!(out, "{}", hex_encode(&bytes))?;
        } else {
            out.write_all(&bytes)?;
        }
    }
    Ok(())
}

/// The bytes one JSON line describes: a whole frame, or (raw) a bare value.
pub fn line_bytes(j: &Json, raw: bool) -> Result<Vec<u8>, JsonError> {
    let err = |m: &str| JsonError { message: m.into() };
    let Json::Object(obj) = j else {
        return Err(err("a line must be a JSON object"));
    };
    let body = if let Some(message) = obj.get("message") {
        let message = from_json(message)?;
        if !matches!(message, Value::Dict(_)) {
            return Err(err("\"message\" must describe a dict"));
        }
        let priority = match obj.get("priority") {
            None => 0,
            Some(p) => match p.as_i64() {
                Some(p @ (0 | 1)) => p,
                _ => return Err(err("\"priority\" must be 0 or 1")),
            },
        };
        marshal::to_bytes(&Value::Tuple(vec![message, Value::int(priority)]))
    } else if let Some(value) = obj.get("value") {
        marshal::to_bytes(&from_json(value)?)
    } else {
        return Err(err("a line needs \"message\" or \"value\""));
    };
    if raw {
        let mut body = body;
        if obj.get("terminator") == Some(&Json::Bool(true)) {
            body.extend_from_slice(WASDR_TERMINATOR);
        }
        return Ok(body);
    }
    let mut framed = Vec::with_capacity(HEADER_LEN + body.len());
    frame::encode_raw_body(&body, &mut framed);
    Ok(framed)
}
