//! `cargo xtask assets`: builds real control-plane binaries (`kube-apiserver`, `etcd`,
//! `kubectl`) and `helm` from Go modules into a cache outside the repository, and prints that
//! directory.
//!
//! No release binaries can be downloaded here, only Go modules, so:
//!
//! - `kube-apiserver` and `kubectl` come from the wrapper module `xtask/assets/kubernetes`: it
//!   requires `k8s.io/kubernetes` and gets, appended at build time, one `replace` per staging
//!   module (`k8s.io/api`, `k8s.io/apiserver`, ...) pointing at its `v0.<minor>.<patch>` release.
//!   The list is generated from the go.mod the module proxy serves for that release
//!   (`go mod download -json`), never kept by hand.
//! - `etcd` comes from `xtask/assets/etcd` (a `main.go` calling `etcdmain.Main`).
//! - `helm` is `go install helm.sh/helm/v3/cmd/helm@`[`HELM_VERSION`] (its own go.mod, no
//!   wrapper), stamped like a release build; it has its own stamp file, so adding or bumping it
//!   does not rebuild the control plane. The chart tests (`examples/kubeconfig/tests/helm.rs`)
//!   use it.
//!
//! Builds run with `GOTOOLCHAIN=local` and `CGO_ENABLED=0`, with the version stamped into
//! `/version`. Go's module and build caches stay where `go env` puts them (outside the
//! repository). The output directory is `$MCR_ASSETS_DIR`, or
//! `${XDG_CACHE_HOME:-~/.cache}/mcr/assets/v<kubernetes version>`; a stamp file there records
//! the inputs, so a second run with nothing changed does no work. The directory is printed on
//! stdout (everything else goes to stderr), so `export KUBEBUILDER_ASSETS=$(cargo xtask assets)`
//! works; `mcr-envtest` also finds it without the variable.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

/// The binaries every asset directory holds (besides `helm`).
pub const BINARIES: &[&str] = &["kube-apiserver", "etcd", "kubectl"];

/// The Helm release `cargo xtask assets` builds (the module proxy serves its module).
pub const HELM_VERSION: &str = "v3.22.0";

/// Builds what is missing or stale and returns the asset directory.
pub fn build(force: bool) -> Result<PathBuf> {
    let go = go_version()?;
    let root = super::workspace_root();
    let wrappers = root.join("xtask").join("assets");
    let kube_mod = std::fs::read_to_string(wrappers.join("kubernetes").join("go.mod"))
        .context("reading xtask/assets/kubernetes/go.mod")?;
    let etcd_mod = std::fs::read_to_string(wrappers.join("etcd").join("go.mod"))
        .context("reading xtask/assets/etcd/go.mod")?;
    let etcd_main = std::fs::read_to_string(wrappers.join("etcd").join("main.go"))
        .context("reading xtask/assets/etcd/main.go")?;
    let kube_version = required_version(&kube_mod, "k8s.io/kubernetes")?;
    let out = output_dir(&kube_version)?;
    let stamp = format!("{go}\n--\n{kube_mod}\n--\n{etcd_mod}\n--\n{etcd_main}");
    let stamp_path = out.join(".inputs");
    let complete = BINARIES.iter().all(|b| out.join(b).is_file());
    if !force && complete && std::fs::read_to_string(&stamp_path).ok().as_deref() == Some(&stamp) {
        eprintln!("control-plane assets are up to date in {}", out.display());
    } else {
        build_control_plane(&out, &kube_version, &kube_mod, &etcd_mod, &etcd_main)?;
        write(&stamp_path, &stamp)?;
    }
    build_helm(&out, &go, force)?;
    Ok(out)
}

/// kube-apiserver, kubectl and etcd into `out`.
fn build_control_plane(
    out: &Path,
    kube_version: &str,
    kube_mod: &str,
    etcd_mod: &str,
    etcd_main: &str,
) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let work = out.join("build");
    let started = Instant::now();

    // Five steps of minutes each on a cold Go cache: a bar on a terminal, lines in CI logs.
    let progress = mcr_progress::Progress::steps("assets", 5);
    let step = |what: &str, work: &mut dyn FnMut() -> Result<()>| -> Result<()> {
        progress.start(what);
        work()?;
        progress.done();
        Ok(())
    };
    let kube_dir = work.join("kubernetes");
    let replaces = staging_replaces(kube_version)?;
    write(&kube_dir.join("go.mod"), &format!("{kube_mod}\n{replaces}"))?;
    step("go mod tidy (kubernetes)", &mut || {
        go_in(&kube_dir, &["mod", "tidy"])
    })?;
    let ldflags = version_ldflags(kube_version)?;
    for (binary, package) in [
        ("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"),
        ("kubectl", "k8s.io/kubernetes/cmd/kubectl"),
    ] {
        step(&format!("go build {binary}"), &mut || {
            build_binary(&kube_dir, &ldflags, &out.join(binary), package)
        })?;
    }

    let etcd_dir = work.join("etcd");
    write(&etcd_dir.join("go.mod"), etcd_mod)?;
    write(&etcd_dir.join("main.go"), etcd_main)?;
    step("go mod tidy (etcd)", &mut || {
        go_in(&etcd_dir, &["mod", "tidy"])
    })?;
    step("go build etcd", &mut || {
        build_binary(&etcd_dir, "-s -w", &out.join("etcd"), ".")
    })?;
    progress.finish();
    eprintln!(
        "built {} in {:.0} s into {}",
        BINARIES.join(", "),
        started.elapsed().as_secs_f64(),
        out.display()
    );
    Ok(())
}

/// `helm` into `out` with `go install`, unless its stamp (Go and Helm versions) is current.
fn build_helm(out: &Path, go: &str, force: bool) -> Result<()> {
    let stamp = format!("{go}\n--\nhelm.sh/helm/v3 {HELM_VERSION}\n");
    let stamp_path = out.join(".inputs-helm");
    let current = std::fs::read_to_string(&stamp_path).ok().as_deref() == Some(&stamp);
    if !force && current && out.join("helm").is_file() {
        eprintln!("helm {HELM_VERSION} is up to date in {}", out.display());
        return Ok(());
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let started = Instant::now();
    let progress = mcr_progress::Progress::steps("helm", 1);
    progress.start(&format!("go install helm {HELM_VERSION}"));
    let module = format!("helm.sh/helm/v3@{HELM_VERSION}");
    let ldflags = helm_ldflags(&go_mod_of(&module)?)?;
    let out_abs = std::path::absolute(out).context("resolving the asset directory")?;
    let package = format!("helm.sh/helm/v3/cmd/helm@{HELM_VERSION}");
    let args = ["install", "-trimpath", "-ldflags", &ldflags, &package];
    let result = go_command()
        .args(args)
        .env("GOBIN", &out_abs)
        .current_dir(std::env::temp_dir())
        .output()
        .context("could not start go")?;
    if !result.status.success() {
        bail!(
            "`go {}` failed ({}):\n{}",
            args.join(" "),
            result.status,
            String::from_utf8_lossy(&result.stderr)
        );
    }
    progress.done();
    progress.finish();
    write(&stamp_path, &stamp)?;
    eprintln!(
        "built helm {HELM_VERSION} in {:.0} s into {}",
        started.elapsed().as_secs_f64(),
        out.display()
    );
    Ok(())
}

/// The go.mod the module proxy serves for `module@version` (downloading the module).
fn go_mod_of(module: &str) -> Result<String> {
    let out = go_output(&["mod", "download", "-json", module])?;
    let path = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("\"GoMod\": \""))
        .and_then(|rest| rest.strip_suffix("\","))
        .context("`go mod download -json` reported no GoMod file")?;
    std::fs::read_to_string(path).with_context(|| format!("reading {path}"))
}

/// `-ldflags` of Helm's release build: its version, and the Kubernetes version of its
/// client-go as the default `.Capabilities.KubeVersion` (otherwise 1.20).
fn helm_ldflags(helm_go_mod: &str) -> Result<String> {
    let client_go = required_version(helm_go_mod, "k8s.io/client-go")?;
    let minor = client_go
        .strip_prefix("v0.")
        .and_then(|rest| rest.split('.').next())
        .with_context(|| format!("unexpected k8s.io/client-go version {client_go}"))?;
    let mut flags = format!("-s -w -X helm.sh/helm/v3/internal/version.version={HELM_VERSION}");
    for pkg in [
        "helm.sh/helm/v3/pkg/lint/rules",
        "helm.sh/helm/v3/pkg/chartutil",
    ] {
        flags.push_str(&format!(
            " -X {pkg}.k8sVersionMajor=1 -X {pkg}.k8sVersionMinor={minor}"
        ));
    }
    Ok(flags)
}

/// `go version`, or one clear message saying what to install.
pub(crate) fn go_version() -> Result<String> {
    match Command::new("go").arg("version").output() {
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).trim().into()),
        Ok(out) => bail!(
            "`go version` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(_) => bail!(
            "`go` is not on PATH: install Go 1.26 or newer (https://go.dev/dl, or your \
             distribution's golang package) to build real control-plane assets, or point \
             KUBEBUILDER_ASSETS at a directory holding kube-apiserver, etcd and kubectl \
             (for example from controller-runtime's setup-envtest)"
        ),
    }
}

/// `$MCR_ASSETS_DIR`, or `${XDG_CACHE_HOME:-$HOME/.cache}/mcr/assets/v<version>`.
fn output_dir(kube_version: &str) -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("MCR_ASSETS_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let cache = match std::env::var_os("XDG_CACHE_HOME") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(std::env::var_os("HOME").context("HOME is not set")?).join(".cache"),
    };
    Ok(cache.join("mcr").join("assets").join(kube_version))
}

/// The version a go.mod requires for `module` (`require <module> <version>`).
pub(crate) fn required_version(go_mod: &str, module: &str) -> Result<String> {
    go_mod
        .lines()
        .filter_map(|line| line.trim().strip_prefix("require "))
        .chain(go_mod.lines().map(str::trim))
        .find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some(module)).then(|| words.next().map(str::to_owned))?
        })
        .with_context(|| format!("the wrapper go.mod does not require {module}"))
}

/// One `replace` line per staging module that the release's own go.mod pins to `v0.0.0`.
fn staging_replaces(kube_version: &str) -> Result<String> {
    let staging = staging_version(kube_version)?;
    let release_mod = go_mod_of(&format!("k8s.io/kubernetes@{kube_version}"))?;
    let modules = staging_modules(&release_mod);
    if modules.is_empty() {
        bail!(
            "found no k8s.io/* v0.0.0 requirements in the go.mod of k8s.io/kubernetes@{kube_version}"
        );
    }
    let mut lines = String::from("// Generated by `cargo xtask assets`.\nreplace (\n");
    for module in modules {
        lines.push_str(&format!("\t{module} => {module} {staging}\n"));
    }
    lines.push_str(")\n");
    Ok(lines)
}

/// The `k8s.io/<name>` modules required at `v0.0.0` (the staging modules).
fn staging_modules(go_mod: &str) -> Vec<String> {
    let mut modules: Vec<String> = go_mod
        .lines()
        .filter_map(|line| {
            let line = line.trim().trim_start_matches("require ").trim();
            let mut words = line.split_whitespace();
            let (module, version) = (words.next()?, words.next()?);
            (module.starts_with("k8s.io/") && version == "v0.0.0").then(|| module.to_owned())
        })
        .collect();
    modules.sort();
    modules.dedup();
    modules
}

/// `v1.36.3` -> `v0.36.3`, the staging modules' tag of a Kubernetes release.
pub(crate) fn staging_version(kube_version: &str) -> Result<String> {
    kube_version
        .strip_prefix("v1.")
        .map(|rest| format!("v0.{rest}"))
        .with_context(|| format!("unexpected Kubernetes version {kube_version}"))
}

/// `-ldflags` that make `/version` and `kubectl version` report the release.
fn version_ldflags(kube_version: &str) -> Result<String> {
    let mut parts = kube_version.trim_start_matches('v').split('.');
    let (major, minor) = (
        parts.next().context("no major version")?,
        parts.next().context("no minor version")?,
    );
    let v = "k8s.io/component-base/version";
    let c = "k8s.io/client-go/pkg/version";
    let mut flags = String::from("-s -w");
    for pkg in [v, c] {
        flags.push_str(&format!(
            " -X {pkg}.gitVersion={kube_version} -X {pkg}.gitMajor={major} \
             -X {pkg}.gitMinor={minor} -X {pkg}.gitTreeState=clean \
             -X {pkg}.buildDate=1970-01-01T00:00:00Z"
        ));
    }
    Ok(flags)
}

fn build_binary(dir: &Path, ldflags: &str, output: &Path, package: &str) -> Result<()> {
    let out = output.display().to_string();
    go_in(
        dir,
        &[
            "build",
            "-trimpath",
            "-buildvcs=false",
            "-ldflags",
            ldflags,
            "-o",
            &out,
            package,
        ],
    )
}

pub(crate) fn go_command() -> Command {
    let mut cmd = Command::new("go");
    // A newer `go` directive must fail loudly, not download a toolchain; no C toolchain needed.
    cmd.env("GOTOOLCHAIN", "local").env("CGO_ENABLED", "0");
    cmd
}

/// Runs `go args` in `dir`; its output (module downloads, compiler messages) is shown only
/// when it fails, so that progress stays readable.
fn go_in(dir: &Path, args: &[&str]) -> Result<()> {
    let out = go_command()
        .args(args)
        .current_dir(dir)
        .output()
        .context("could not start go")?;
    if !out.status.success() {
        bail!(
            "`go {}` failed in {} ({}):\n{}{}",
            args.join(" "),
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

pub(crate) fn go_output(args: &[&str]) -> Result<String> {
    let out = go_command()
        .args(args)
        .current_dir(std::env::temp_dir())
        .output()
        .context("could not start go")?;
    if !out.status.success() {
        bail!(
            "`go {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub(crate) fn write(path: &Path, contents: &str) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(path, contents).with_context(|| format!("writing {}", path.display()))
}

/// The asset directory: `KUBEBUILDER_ASSETS`, or what `cargo xtask assets` builds.
pub(crate) fn directory() -> Result<PathBuf> {
    match std::env::var_os("KUBEBUILDER_ASSETS") {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            for binary in ["kube-apiserver", "etcd"] {
                anyhow::ensure!(
                    dir.join(binary).is_file(),
                    "KUBEBUILDER_ASSETS={} has no {binary}",
                    dir.display()
                );
            }
            Ok(dir)
        }
        _ => build(false).context("building the real control-plane assets"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_modules_are_the_v0_0_0_k8s_requirements() {
        let go_mod = "module k8s.io/kubernetes\n\nrequire (\n\tgithub.com/x/y v1.2.3\n\
                      \tk8s.io/api v0.0.0\n\tk8s.io/utils v0.0.0-2026\n\tk8s.io/apiserver v0.0.0\n)\n\
                      require k8s.io/streaming v0.0.0\n";
        assert_eq!(
            staging_modules(go_mod),
            ["k8s.io/api", "k8s.io/apiserver", "k8s.io/streaming"]
        );
    }

    #[test]
    fn the_wrapper_pins_a_release_and_its_staging_tag() {
        let go_mod = include_str!("../assets/kubernetes/go.mod");
        let version = required_version(go_mod, "k8s.io/kubernetes").unwrap();
        assert!(version.starts_with("v1."), "{version}");
        assert_eq!(
            staging_version(&version).unwrap(),
            version.replacen("v1.", "v0.", 1)
        );
        let etcd = include_str!("../assets/etcd/go.mod");
        let etcd_version = required_version(etcd, "go.etcd.io/etcd/server/v3").unwrap();
        assert!(etcd_version.starts_with("v3.6."), "{etcd_version}");
    }

    #[test]
    fn helm_is_stamped_with_its_version_and_client_go_minor() {
        let go_mod = "module helm.sh/helm/v3\n\ngo 1.26.0\n\nrequire (\n\tk8s.io/api v0.37.0\n\
                      \tk8s.io/client-go v0.37.0\n)\n";
        let flags = helm_ldflags(go_mod).unwrap();
        assert!(flags.contains(&format!("internal/version.version={HELM_VERSION}")));
        assert!(
            flags.contains("pkg/chartutil.k8sVersionMinor=37"),
            "{flags}"
        );
        assert!(
            flags.contains("pkg/lint/rules.k8sVersionMajor=1"),
            "{flags}"
        );
        assert!(helm_ldflags("module x\n").is_err());
    }

    #[test]
    fn ldflags_stamp_major_and_minor() {
        let flags = version_ldflags("v1.36.3").unwrap();
        assert!(flags.contains("k8s.io/component-base/version.gitVersion=v1.36.3"));
        assert!(flags.contains("gitMinor=36"));
    }
}
