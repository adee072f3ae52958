//! mcr-envtest's label and field selector parsers (label selector, NUL, field selector).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (label, field) = text.split_once('\0').unwrap_or((text, ""));
    mcr_envtest::fuzz::selectors(label, field);
});
