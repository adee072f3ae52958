//! mcr-envtest's request query parsing (list/watch/write/delete options); the bytes after the
//! first NUL are a DeleteOptions body.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (raw, body) = match data.iter().position(|b| *b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    if let Ok(raw) = std::str::from_utf8(raw) {
        mcr_envtest::fuzz::query(raw, body);
    }
});
