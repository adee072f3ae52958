//! A module already in Go's module cache, found and checked without `go`: the `h1:` hash of
//! go.sum is the SHA-256 of the lines `<sha256 hex>  <module>@<version>/<path>` of every file,
//! in byte order of the names, in base64.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use base64::Engine;
use sha2::{Digest, Sha256};

/// The module cache: `GOMODCACHE`, else `$GOPATH/pkg/mod`, else `~/go/pkg/mod`.
fn module_cache() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("GOMODCACHE").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    if let Some(path) = std::env::var_os("GOPATH").filter(|d| !d.is_empty()) {
        let first = std::env::split_paths(&path).next()?;
        return Some(first.join("pkg").join("mod"));
    }
    Some(
        PathBuf::from(std::env::var_os("HOME")?)
            .join("go")
            .join("pkg")
            .join("mod"),
    )
}

/// A module path or version as the cache writes it (`!` before each lowered capital).
fn escape(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_uppercase() {
            out.push('!');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The cached folder of `module@version`, once its hash is `sum`.
pub fn cached(module: &str, version: &str, sum: &str) -> Result<PathBuf> {
    let cache = module_cache().context("no module cache (neither GOMODCACHE, GOPATH nor HOME)")?;
    let dir = cache.join(format!("{}@{}", escape(module), escape(version)));
    if !dir.is_dir() {
        bail!(
            "{module}@{version} is not in the module cache {} (and `go` is not there to download it)",
            cache.display()
        );
    }
    let got = hash(&dir, &format!("{module}@{version}"))?;
    if got != sum {
        bail!(
            "{} hashes to {got}, the corpus definition pins {sum}",
            dir.display()
        );
    }
    Ok(dir)
}

/// The `h1:` hash of the files under `dir`, named `<prefix>/<relative path>`.
pub fn hash(dir: &Path, prefix: &str) -> Result<String> {
    let mut files = Vec::new();
    collect(dir, dir, prefix, &mut files)?;
    files.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut summary = Sha256::new();
    for (name, path) in files {
        let mut file =
            std::fs::File::open(&path).with_context(|| format!("reading {}", path.display()))?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        let hex = hex::encode(hasher.finalize());
        summary.update(format!("{hex}  {name}\n").as_bytes());
    }
    Ok(format!(
        "h1:{}",
        base64::engine::general_purpose::STANDARD.encode(summary.finalize())
    ))
}

fn collect(root: &Path, dir: &Path, prefix: &str, out: &mut Vec<(String, PathBuf)>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry?;
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            collect(root, &path, prefix, out)?;
        } else if kind.is_file() {
            let relative = path.strip_prefix(root).unwrap_or(&path);
            let name = format!("{prefix}/{}", relative.to_string_lossy().replace('\\', "/"));
            out.push((name, path));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capitals_are_escaped_as_the_module_cache_does() {
        assert_eq!(
            escape("github.com/BurntSushi/toml"),
            "github.com/!burnt!sushi/toml"
        );
    }

    #[test]
    fn the_hash_is_gos_h1_over_sorted_names() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path();
        std::fs::write(dir.join("b.txt"), "b\n").unwrap();
        std::fs::create_dir_all(dir.join("a")).unwrap();
        std::fs::write(dir.join("a/x.txt"), "x\n").unwrap();
        // sha256("b\n") and sha256("x\n"), listed in name order, hashed again.
        let expected = {
            let line = |content: &str, name: &str| {
                let hex = hex::encode(Sha256::digest(content.as_bytes()));
                format!("{hex}  m@v1/{name}\n")
            };
            let summary = format!("{}{}", line("x\n", "a/x.txt"), line("b\n", "b.txt"));
            format!(
                "h1:{}",
                base64::engine::general_purpose::STANDARD
                    .encode(Sha256::digest(summary.as_bytes()))
            )
        };
        assert_eq!(hash(dir, "m@v1").unwrap(), expected);
    }
}
