//! Criterion benches of the FSCMT frame codec (MS-FSCMT 2.2.1) on the hot paths of the event loop:
//! cutting frames out of a read buffer and decoding (`split` + `decode_body`) or checking them
//! (`split` + `scan_body`), and encoding them (`encode_dict`).
//!
//! Small frames (PPDUP_ADD, CMD_UM_URI from the golden vectors) are measured in frames per second,
//! a batch of back-to-back frames per iteration as a socket read delivers them. Large frames
//! (about 1 MiB: a list of 4 KiB byte strings, a list of crawl queue entries) in bytes per second.
//! The typed message model's general path (`Message::from_dict`, `frame::encode_message`) over
//! every FSCMT golden vector in messages per second.
//!
//! `cargo bench --bench codec`; the aim is 5 million PPDUP_ADD decodes per second per core and
//! 1 GB/s on large frames.

use std::borrow::Cow;
use std::hint::black_box;
use std::time::Duration;

use crawlfleet_core::frame::{self, Priority};
use crawlfleet_core::marshal::{Dict, Limits, StrForm, Value};
use crawlfleet_core::msg::Message;
use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};

/// Frames per iteration in the small-frame benches.
const BATCH: usize = 1000;

/// The wire bytes of the golden vector `name` (tests/data/wire-vectors.tsv, the repository's
/// copy of shared/vectors).
fn vector(name: &str) -> Vec<u8> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/wire-vectors.tsv");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let hex = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(name)?.strip_prefix('\t')?.split('\t').next())
        .unwrap_or_else(|| panic!("no vector {name}"));
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Splits every frame off `stream` and hands its body to `each`; returns how many.
#[inline(always)]
fn for_each_frame(stream: &[u8], limits: &Limits, mut each: impl FnMut(&[u8])) -> usize {
    let mut buf = stream;
    let mut n = 0;
    while let Some((body, used)) = frame::split(buf, limits).expect("frame length") {
        each(body);
        buf = &buf[used..];
        n += 1;
    }
    n
}

/// Splits and decodes every frame of `stream`; returns how many.
fn decode_all(stream: &[u8], limits: &Limits) -> usize {
    for_each_frame(stream, limits, |body| {
        black_box(frame::decode_body(body, limits).expect("valid frame"));
    })
}

/// Splits and decodes every frame of `stream` to a typed message; returns how many.
fn decode_typed_all(stream: &[u8], limits: &Limits) -> usize {
    for_each_frame(stream, limits, |body| {
        black_box(frame::decode_message(body, limits).expect("valid message"));
    })
}

/// Splits and scans every frame of `stream`; returns how many.
fn scan_all(stream: &[u8], limits: &Limits) -> usize {
    for_each_frame(stream, limits, |body| {
        black_box(frame::scan_body(body, limits).expect("valid frame"));
    })
}

/// How one group is measured: frames per iteration, what to count, criterion samples.
struct Shape {
    per_iter: usize,
    throughput: Throughput,
    samples: usize,
    sampling: SamplingMode,
}

/// Decode, scan and encode benches of one frame, `shape.per_iter` copies per iteration.
fn bench_frame(c: &mut Criterion, group: &str, wire: &[u8], shape: Shape, typed: bool) {
    let per_iter = shape.per_iter;
    let limits = Limits::default();
    let stream = wire.repeat(per_iter);
    let decoded = frame::decode_body(&wire[frame::HEADER_LEN..], &limits).expect("valid frame");
    let (message, priority) = (decoded.message, decoded.priority);
    // The benches measure what they claim only if the codec is right about these frames.
    assert_eq!(decode_all(&stream, &limits), per_iter);
    assert_eq!(scan_all(&stream, &limits), per_iter);
    let mut out = Vec::new();
    frame::encode_dict(&message, priority, &mut out);
    assert_eq!(out, wire, "{group}: encode_dict must give the frame back");

    let mut g = c.benchmark_group(group);
    g.throughput(shape.throughput)
        .sample_size(shape.samples)
        .sampling_mode(shape.sampling);
    g.bench_function("split+decode_body", |b| {
        b.iter(|| decode_all(black_box(&stream), &limits))
    });
    if typed {
        g.bench_function("split+decode_message", |b| {
            b.iter(|| decode_typed_all(black_box(&stream), &limits))
        });
    }
    g.bench_function("split+scan_body", |b| {
        b.iter(|| scan_all(black_box(&stream), &limits))
    });
    let mut out = Vec::with_capacity(stream.len());
    g.bench_function("encode_dict", |b| {
        b.iter(|| {
            out.clear();
            for _ in 0..per_iter {
                frame::encode_dict(black_box(&message), priority, &mut out);
            }
            black_box(out.len())
        })
    });
    g.finish();
}

fn small_frames(c: &mut Criterion) {
    for name in ["PPDUP_ADD", "CMD_UM_URI"] {
        let wire = vector(name);
        let shape = Shape {
            per_iter: BATCH,
            throughput: Throughput::Elements(BATCH as u64),
            samples: 100,
            sampling: SamplingMode::Auto,
        };
        bench_frame(c, name, &wire, shape, true);
    }
}

/// A frame of `cm`/`dn`/`pd` whose `pd` is `items`.
fn frame_of(cm: i64, items: Vec<Value<'_>>) -> Vec<u8> {
    let message: Dict<'_> = vec![
        (Value::bytes(b"dn"), Value::bytes(b"example")),
        (Value::bytes(b"cm"), Value::int(cm)),
        (Value::bytes(b"pd"), Value::list(items)),
    ];
    let mut out = Vec::new();
    frame::encode_dict(&message, Priority::Normal, &mut out);
    out
}

/// About 1 MiB: 256 byte strings of 4 KiB (document bodies, checksum batches).
fn blob_frame() -> Vec<u8> {
    let mut rng = fastrand::Rng::with_seed(1);
    let blobs: Vec<Vec<u8>> = (0..256)
        .map(|_| (0..4096).map(|_| rng.u8(..)).collect())
        .collect();
    frame_of(27, blobs.iter().map(|b| Value::bytes(b)).collect())
}

/// About 1 MiB of crawl queue entries (MS-FSCMT 2.2.3, CMD_UM_URI `pd`), each with its own URI.
fn uri_entries_frame() -> Vec<u8> {
    let wire = vector("CMD_UM_URI");
    let f = frame::decode_body(&wire[frame::HEADER_LEN..], &Limits::default()).expect("vector");
    let entry = Value::Dict(f.message)
        .get(b"pd")
        .cloned()
        .expect("pd")
        .into_owned();
    let entries: Vec<Value<'static>> = (0..3300)
        .map(|i| {
            let mut e = entry.clone();
            if let Value::Tuple(items) = &mut e {
                if let Value::Tuple(uri) = &mut items[1] {
                    let host = format!("www{i}.contoso.com");
                    uri[0] = Value::owned_bytes(
                        format!("http://{host}/docs/{i}/index.html").into_bytes(),
                    );
                    uri[2] = Value::Bytes(Cow::Owned(host.clone().into_bytes()), StrForm::Plain);
                    uri[3] = Value::owned_bytes(host.into_bytes());
                }
            }
            e
        })
        .collect();
    frame_of(25, entries)
}

fn large_frames(c: &mut Criterion) {
    for (group, wire) in [
        ("large_blobs", blob_frame()),
        ("large_uri_entries", uri_entries_frame()),
    ] {
        // Flat sampling: a decode of ~1 MiB of crawl queue entries takes ~10 ms.
        let shape = Shape {
            per_iter: 1,
            throughput: Throughput::Bytes(wire.len() as u64),
            samples: 30,
            sampling: SamplingMode::Flat,
        };
        bench_frame(c, group, &wire, shape, false);
    }
}

/// Every FSCMT golden vector (the WASDR ones are not FSCMT messages), by name.
fn fscmt_vectors() -> Vec<(String, Vec<u8>)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/wire-vectors.tsv");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("WASDR") && !l.trim().is_empty())
        .filter_map(|l| l.split('\t').next())
        .map(|name| (name.to_owned(), vector(name)))
        .collect()
}

/// The typed message model's general path (MS-FSCMT 2.2.3-2.2.5) on every FSCMT golden vector:
/// `Message::from_dict` over the decoded dicts and `frame::encode_message` of the messages, one
/// iteration covering every vector once.
fn typed_model(c: &mut Criterion) {
    let limits = Limits::default();
    let wires = fscmt_vectors();
    let dicts: Vec<Dict<'_>> = wires
        .iter()
        .map(|(_, w)| {
            frame::decode_body(&w[frame::HEADER_LEN..], &limits)
                .expect("valid frame")
                .message
        })
        .collect();
    let messages: Vec<Message<'_>> = dicts
        .iter()
        .map(|d| Message::from_dict(d).expect("valid message"))
        .collect();
    let mut g = c.benchmark_group("typed_model");
    g.throughput(Throughput::Elements(dicts.len() as u64));
    g.bench_function("from_dict", |b| {
        b.iter(|| {
            for d in black_box(&dicts) {
                black_box(Message::from_dict(d).expect("valid message"));
            }
        })
    });
    let mut out = Vec::with_capacity(4096);
    g.bench_function("encode_message", |b| {
        b.iter(|| {
            out.clear();
            for m in black_box(&messages) {
                frame::encode_message(m, Priority::Normal, &mut out);
            }
            black_box(out.len())
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = small_frames, large_frames, typed_model
}
criterion_main!(benches);
