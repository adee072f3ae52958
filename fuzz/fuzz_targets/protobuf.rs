//! mcr-envtest's Kubernetes protobuf reader (the `k8s\0` envelope and the object inside).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut body = b"k8s\0".to_vec();
    body.extend_from_slice(data);
    mcr_envtest::fuzz::protobuf(&body);
    mcr_envtest::fuzz::protobuf(data);
});
