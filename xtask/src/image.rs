//! `cargo xtask image`: the example-kubeconfig container image, `FROM scratch`
//! (`deploy/Dockerfile`), built with podman and saved as an OCI archive.
//!
//! 1. The binary is built on the host, statically linked (glibc, `-C target-feature=+crt-static`,
//!    symbols stripped). The flags go to the final crate only (`cargo rustc ... -- <flags>`),
//!    so the dependencies the release build already has (from `cargo xtask bench`) are reused,
//!    not built a second time with other `RUSTFLAGS`. The result is checked to have no ELF
//!    interpreter (no dynamic loader, so nothing for a scratch image to lack).
//! 2. `podman build` with a context holding only that binary: nothing is pulled.
//! 3. A smoke run as a Pod runs it (UID 65532, read-only root, every capability dropped,
//!    `--help`), then `podman save --format oci-archive` to
//!    `<target>/image/example-kubeconfig-<version>.oci.tar`.
//!
//! The image is [`tag()`]; `cargo xtask e2e` runs the kubeconfig example's RBAC proof in it
//! when it exists (see `e2e_real`).

use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, Result, bail, ensure};

/// The image's name, without tag (podman's `localhost/` prefix: built here, never pulled).
const NAME: &str = "localhost/mcr/example-kubeconfig";

/// `localhost/mcr/example-kubeconfig:<workspace version>`.
pub fn tag() -> String {
    format!("{NAME}:{}", env!("CARGO_PKG_VERSION"))
}

/// Whether podman has the image [`tag()`].
pub fn exists() -> bool {
    Command::new("podman")
        .args(["image", "exists", &tag()])
        .output()
        .is_ok_and(|out| out.status.success())
}

/// Builds the binary, the image and the archive, and prints their sizes.
pub fn run() -> Result<()> {
    ensure!(
        super::on_path("podman"),
        "`podman` is not on PATH (Debian: `apt-get install podman runc`; see deploy/README.md)"
    );
    let root = super::workspace_root();
    let target = super::bench::target_dir(&root);
    super::cargo(&[
        "rustc",
        "--release",
        "-p",
        "example-kubeconfig",
        "--bin",
        "example-kubeconfig",
        "--",
        "-C",
        "target-feature=+crt-static",
        "-C",
        "strip=symbols",
    ])?;
    let built = target.join("release").join("example-kubeconfig");
    ensure_static(&built)?;
    let dir = target.join("image");
    let context = dir.join("context");
    std::fs::create_dir_all(&context).with_context(|| format!("creating {}", context.display()))?;
    let binary = context.join("example-kubeconfig");
    std::fs::copy(&built, &binary).with_context(|| format!("copying {}", built.display()))?;

    let tag = tag();
    let dockerfile = root.join("deploy").join("Dockerfile");
    let version = format!("VERSION={}", env!("CARGO_PKG_VERSION"));
    let (dockerfile, context_arg) = (
        dockerfile.display().to_string(),
        context.display().to_string(),
    );
    // The image this build replaces, removed once the tag has moved (not left dangling).
    let previous = podman_output(&["image", "inspect", "--format", "{{.Id}}", &tag]).ok();
    super::run(
        "podman",
        &[
            "build",
            "--pull=never",
            "--layers=false",
            "--build-arg",
            &version,
            "-f",
            &dockerfile,
            "-t",
            &tag,
            &context_arg,
        ],
        &[],
    )?;
    let current = podman_output(&["image", "inspect", "--format", "{{.Id}}", &tag])?;
    if let Some(previous) = previous.filter(|id| *id != current) {
        let _ = podman_output(&["rmi", previous.trim()]);
    }
    // As deploy/base/deployment.yaml runs it.
    super::run(
        "podman",
        &[
            "run",
            "--rm",
            "--pull=never",
            "--read-only",
            "--read-only-tmpfs=false",
            "--cap-drop=ALL",
            "--security-opt=no-new-privileges",
            "--user",
            "65532:65532",
            &tag,
            "--help",
        ],
        &[],
    )?;
    let archive = dir.join(format!(
        "example-kubeconfig-{}.oci.tar",
        env!("CARGO_PKG_VERSION")
    ));
    // A fresh archive, not one left by an earlier build.
    let _ = std::fs::remove_file(&archive);
    let archive_arg = archive.display().to_string();
    super::run(
        "podman",
        &["save", "--format", "oci-archive", "-o", &archive_arg, &tag],
        &[],
    )?;
    let image_size = podman_output(&["image", "inspect", "--format", "{{.Size}}", &tag])?;
    let image_size: u64 = image_size
        .trim()
        .parse()
        .with_context(|| format!("podman reported the image size as {image_size:?}"))?;
    println!(
        "image {tag}: {} (binary {}, OCI archive {} at {})",
        mib(image_size),
        mib(file_size(&binary)?),
        mib(file_size(&archive)?),
        archive.display()
    );
    Ok(())
}

fn podman_output(args: &[&str]) -> Result<String> {
    let out = Command::new("podman")
        .args(args)
        .output()
        .context("could not start podman")?;
    if !out.status.success() {
        bail!(
            "`podman {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn file_size(path: &Path) -> Result<u64> {
    Ok(std::fs::metadata(path)
        .with_context(|| format!("reading {}", path.display()))?
        .len())
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// Fails unless `path` is a 64-bit little-endian ELF executable without a `PT_INTERP` program
/// header: one the kernel starts without a dynamic loader, as a scratch image needs.
fn ensure_static(path: &Path) -> Result<()> {
    const PT_INTERP: u32 = 3;
    let elf = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let u16_at = |at: usize| {
        elf.get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u64_at = |at: usize| {
        elf.get(at..at + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
    };
    ensure!(
        elf.starts_with(b"\x7fELF\x02\x01"),
        "{} is not a 64-bit little-endian ELF file",
        path.display()
    );
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    else {
        bail!("{}: truncated ELF header", path.display());
    };
    for i in 0..usize::from(phnum) {
        let at = usize::try_from(phoff)? + i * usize::from(phentsize);
        let kind = elf
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .with_context(|| format!("{}: truncated program headers", path.display()))?;
        ensure!(
            kind != PT_INTERP,
            "{} is dynamically linked (it names an ELF interpreter): the scratch image has \
             no libc",
            path.display()
        );
    }
    Ok(())
}
