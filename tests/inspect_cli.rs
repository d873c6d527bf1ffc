//! `crawlfleet inspect` as an operator runs it: on the example captures (the golden vectors of
//! MS-FSCMT 2.2.1 and MS-FSWASDR 2.2.1), round trips through --encode, and bad input.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use crate::util::checkout_path;

/// Runs `crawlfleet ARGS` with `stdin`, showing the command and its output when a check fails.
fn crawlfleet(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the crawlfleet binary runs");
    let mut input = child.stdin.take().expect("piped stdin");
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().expect("crawlfleet finishes");
    writer.join().expect("stdin writer");
    out
}

fn show(args: &[&str], out: &Output) -> String {
    format!(
        "crawlfleet {}\nstatus: {}\nstdout:\n{}\nstderr:\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

#[test]
fn capture_prints_one_line_per_frame_and_encodes_back_byte_for_byte() {
    let capture = std::fs::read(checkout_path("examples/fscmt-capture.bin")).unwrap();
    let args = ["inspect", "examples/fscmt-capture.bin"];
    let out = crawlfleet(&args, b"");
    assert!(out.status.success(), "{}", show(&args, &out));
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 13, "{}", show(&args, &out));
    assert_eq!(lines[0]["command"], "CMD_UM_INIT");
    assert_eq!(lines[0]["message"]["mi"], "70-86-12-20");
    assert_eq!(
        lines[0]["message"]["xp"],
        serde_json::json!(["host.contoso.com", 10000])
    );
    assert_eq!(lines[5]["command"], "CMD_UM_URI_URG");
    assert_eq!(lines[5]["priority"], 1);
    // The checksum is not UTF-8: shown as hex.
    assert_eq!(
        lines[8]["message"]["cs"]["$hex"],
        "a9ebcb8facbdc743775a1d3b522da8b6"
    );

    let enc = ["inspect", "--encode"];
    let back = crawlfleet(&enc, &out.stdout);
    assert!(back.status.success(), "{}", show(&enc, &back));
    assert_eq!(back.stdout, capture);

    // The same through hex, both ways.
    let enc_hex = ["inspect", "--encode", "--hex"];
    let hex_out = crawlfleet(&enc_hex, &out.stdout);
    assert!(hex_out.status.success(), "{}", show(&enc_hex, &hex_out));
    let from_hex = crawlfleet(&["inspect", "--hex"], &hex_out.stdout);
    assert_eq!(from_hex.stdout, out.stdout);
}

#[test]
fn raw_values_with_the_link_store_terminator_round_trip() {
    let capture = std::fs::read(checkout_path("examples/link-store-capture.bin")).unwrap();
    let args = ["inspect", "--raw", "-"];
    let out = crawlfleet(&args, &capture);
    assert!(out.status.success(), "{}", show(&args, &out));
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["value"]["application"], "webanalyzer");
    assert_eq!(first["terminator"], true);
    let back = crawlfleet(&["inspect", "--raw", "--encode"], &out.stdout);
    assert!(back.status.success());
    assert_eq!(back.stdout, capture);
}

#[test]
fn every_marshal_form_survives_the_json_round_trip() {
    // t / R (interned strings and references), u, I, small l, f, sets, a dict with int keys.
    let body = b"(\x02\x00\x00\x00{t\x02\x00\x00\x00cmi\x0a\x00\x00\x00\
u\x01\x00\x00\x00xI\x01\x00\x00\x00\x00\x00\x00\x00\
s\x01\x00\x00\x00lR\x00\x00\x00\x00\
s\x01\x00\x00\x00ff\x030.1\
s\x01\x00\x00\x00s<\x01\x00\x00\x00N\
i\x01\x00\x00\x00l\x01\x00\x00\x00\x05\x00\
0i\x00\x00\x00\x00";
    let capture = frame(body);
    let out = crawlfleet(&["inspect", "-"], &capture);
    assert!(out.status.success(), "{}", show(&["inspect"], &out));
    let back = crawlfleet(&["inspect", "--encode"], &out.stdout);
    assert_eq!(
        back.stdout,
        capture,
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_bad_frame_is_reported_and_the_others_still_print() {
    let good = std::fs::read(checkout_path("examples/fscmt-capture.bin")).unwrap();
    let first_len = u32::from_be_bytes(good[..4].try_into().unwrap()) as usize + 4;
    let mut capture = good[..first_len].to_vec();
    capture.extend(frame(b"c\x00\x00")); // a code object: not in the format
    capture.extend_from_slice(&good[first_len..]);
    let args = ["inspect"];
    let out = crawlfleet(&args, &capture);
    assert!(!out.status.success(), "{}", show(&args, &out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 13);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("frame at byte {first_len}")) && err.contains("unknown type code"),
        "{}",
        show(&args, &out)
    );
}

#[test]
fn oversized_and_truncated_frames_are_refused() {
    let args = ["inspect", "--max-frame", "1000"];
    let out = crawlfleet(&args, &[0, 0, 0x10, 0, b'N']);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("exceeds the limit of 1000"),
        "{}",
        show(&args, &out)
    );
    let out = crawlfleet(&["inspect"], &[0, 0, 0, 9, b'N']);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("input ends after 1"));
}

#[test]
fn bad_json_lines_name_the_line() {
    let input = b"{\"priority\":0,\"message\":{\"cm\":10}}\n{\"message\": [1]}\n";
    let args = ["inspect", "--encode"];
    let out = crawlfleet(&args, input);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("line 2"),
        "{}",
        show(&args, &out)
    );
    let out = crawlfleet(&args, b"{\"priority\": 2, \"message\": {}}\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("priority"));
    let out = crawlfleet(&args, b"not json\n");
    assert!(!out.status.success());
}
