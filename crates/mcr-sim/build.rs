//! Declares `tokio_unstable` as a known cfg: built with `RUSTFLAGS="--cfg tokio_unstable"`,
//! the simulation seeds each runtime's generator (the branch `tokio::select!` polls first).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(tokio_unstable)");
}
