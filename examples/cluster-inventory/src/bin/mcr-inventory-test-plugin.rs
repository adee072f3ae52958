//! `mcr-inventory-test-plugin`: the credential plugin of the cluster-inventory example and
//! tests (see `src/plugin.rs`).

#[path = "../plugin.rs"]
mod plugin;

fn main() -> std::process::ExitCode {
    plugin::main()
}
