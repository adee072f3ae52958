// The wrapper module `cargo xtask assets` builds kube-apiserver and kubectl from.
//
// k8s.io/kubernetes cannot be `go install`ed: its go.mod replaces every staging module
// (k8s.io/api, k8s.io/apiserver, ...) with a local v0.0.0 directory. `cargo xtask assets`
// copies this file into its build directory and appends one replace line per staging module,
// pointing at that module's v0.<minor>.<patch> release, generated from the go.mod the module
// proxy serves for the release required below. Change the version here to move every asset.
module mcr.local/assets/kubernetes

go 1.26.0

require k8s.io/kubernetes v1.36.3

// `tool` keeps `go mod tidy` from dropping the requirement (nothing here imports it).
tool (
	k8s.io/kubernetes/cmd/kube-apiserver
	k8s.io/kubernetes/cmd/kubectl
)
