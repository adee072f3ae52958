//! A stand-in for the `kind` command line, for machines without kind and Docker: a small shell
//! script that answers the two commands the provider runs from a directory of kubeconfig files.
//!
//! * `kind get clusters` prints the stem of every `<dir>/<name>.kubeconfig`;
//! * `kind get kubeconfig --name <name>` prints `<dir>/<name>.kubeconfig`.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

const SCRIPT: &str = r#"#!/bin/sh
dir='@DIR@'
if [ "$1" = get ] && [ "$2" = clusters ]; then
  for f in "$dir"/*.kubeconfig; do
    [ -e "$f" ] || continue
    n="${f##*/}"
    echo "${n%.kubeconfig}"
  done
  exit 0
fi
if [ "$1" = get ] && [ "$2" = kubeconfig ] && [ "$3" = --name ] && [ -e "$dir/$4.kubeconfig" ]; then
  exec cat "$dir/$4.kubeconfig"
fi
echo "ERROR: fake kind cannot do: $*" >&2
exit 1
"#;

/// Writes the fake `kind` executable to `bin`, serving the kubeconfigs in `kubeconfigs`.
pub fn write(bin: &Path, kubeconfigs: &Path) -> Result<PathBuf> {
    let dir = kubeconfigs.to_string_lossy();
    anyhow::ensure!(!dir.contains('\''), "unsupported directory name: {dir}");
    std::fs::write(bin, SCRIPT.replace("@DIR@", &dir))
        .with_context(|| format!("writing {}", bin.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(bin, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(bin.to_path_buf())
}
