// The Go peer of the mcr benchmarks (B8): the same ConfigMap controller on Go's
// multicluster-runtime and its file provider. Only this file and main.go are kept in the
// repository; `cargo xtask bench` copies both into a build directory under the target dir,
// runs `go mod tidy` there (go.sum is generated, never committed) and builds with
// GOTOOLCHAIN=local CGO_ENABLED=0.
//
// Pins: multicluster-runtime v0.24.1 (the newest release tag). The module proxy does not
// serve providers/file v0.24.1 (404), so the file provider is v0.23.3: its Go code is
// identical to v0.24.1's (the two tags differ only in providers/file/go.mod and go.sum), and
// minimal version selection builds it against multicluster-runtime v0.24.1 and
// controller-runtime v0.24.1 required below.
module mcr.local/bench/go-peer

go 1.26.3

require (
	k8s.io/api v0.36.0
	k8s.io/client-go v0.36.0
	sigs.k8s.io/controller-runtime v0.24.1
	sigs.k8s.io/multicluster-runtime v0.24.1
	sigs.k8s.io/multicluster-runtime/providers/file v0.23.3
)
