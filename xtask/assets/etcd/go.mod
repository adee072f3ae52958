// The wrapper module `cargo xtask assets` builds etcd from (main.go calls etcdmain.Main).
// etcd's own go.mod replaces its sibling modules with local paths; as a dependency those
// replaces do not apply, so a plain requirement is enough. Etcd older than 3.5.13 makes
// recent API servers fail watches: keep 3.6.
module mcr.local/assets/etcd

go 1.26.0

require go.etcd.io/etcd/server/v3 v3.6.14
