// Command go-peer is the Go side of the mcr benchmark B8: one ConfigMap controller on
// sigs.k8s.io/multicluster-runtime over a fleet of kubeconfig files (its file provider),
// reconciling like the mcr side: read the object from the cluster's cache and record the
// highest counter value (`data.v`) seen per object.
//
// It speaks the protocol of mcr-bench's measured children on stdout:
//
//	READY         every object of every cluster was reconciled at least once
//	DONE          every object was seen at the value given by -rounds
//	RESULT {json} peak RSS, RSS and CPU seconds (user+sys) at READY and at DONE, and
//	              "rises": when each object's highest value rose after READY
//	              ([[cluster, object, [[value, "unix nanos"], ...]], ...])
//
// The bench runner starts its loader after READY and times until DONE.
//
// With -sharded (B12) it is one replica of a sharded fleet instead: the same controller
// under multicluster-runtime's sharded coordinator (pkg/manager/coordinator/sharded: a peer
// Lease per replica, HRW assignment, a fence Lease per cluster, all at their defaults) with
// the peer identity -identity, and it speaks B11's protocol until its stdin closes:
//
//	OWNED <n>                            the clusters the coordinator has engaged here,
//	                                     whenever that number changes
//	SEEN <cluster> <value> <unix nanos>  every reconcile
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded"
	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded/peers"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/providers/file"
)

// probe records the highest value seen per object and closes `reached` once every
// expected object has been seen at `target` or above.
type probe struct {
	mu       sync.Mutex
	seen     map[string]uint64
	target   uint64
	expected int
	done     int
	reached  chan struct{}
	// record: whether observe records when each object's highest value rose (wall-clock
	// nanoseconds, the clock the bench runner stamps write acknowledgements with).
	record bool
	rises  map[rise][][2]any
}

// rise names one object of one cluster in probe.rises.
type rise struct{ cluster, object string }

func (p *probe) expect(target uint64, expected int) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target, p.expected, p.done = target, expected, 0
	for _, v := range p.seen {
		if v >= target {
			p.done++
		}
	}
	p.reached = make(chan struct{})
	if p.done >= p.expected {
		close(p.reached)
	}
	return p.reached
}

func (p *probe) observe(cluster, object string, v uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := cluster + "/" + object
	old, known := p.seen[key]
	if known && old >= v {
		return
	}
	if p.record {
		r := rise{cluster, object}
		p.rises[r] = append(p.rises[r], [2]any{v, strconv.FormatInt(time.Now().UnixNano(), 10)})
	}
	p.seen[key] = v
	if v >= p.target && (!known || old < p.target) {
		p.done++
		if p.done == p.expected {
			close(p.reached)
		}
	}
}

// memory returns VmRSS and VmHWM of this process in KiB.
func memory() (rss, hwm uint64) {
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		n, _ := strconv.ParseUint(fields[1], 10, 64)
		switch fields[0] {
		case "VmRSS:":
			rss = n
		case "VmHWM:":
			hwm = n
		}
	}
	return rss, hwm
}

// cpuSeconds returns user+sys CPU time of this process so far, from /proc/self/stat in
// clock ticks of 1/100 s (as the mcr side reads it).
func cpuSeconds() float64 {
	stat, _ := os.ReadFile("/proc/self/stat")
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseUint(fields[11], 10, 64)
	stime, _ := strconv.ParseUint(fields[12], 10, 64)
	return float64(utime+stime) / 100
}

// newManager runs the file provider over the members' kubeconfig files, with no metrics or
// health endpoints; it exits on an error.
func newManager(hostCfg *rest.Config, members []string, opts ...mcmanager.Option) mcmanager.Manager {
	provider, err := file.New(file.Options{KubeconfigFiles: members})
	if err != nil {
		fail("file provider: %v", err)
	}
	mgr, err := mcmanager.New(hostCfg, provider, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	}, opts...)
	if err != nil {
		fail("manager: %v", err)
	}
	return mgr
}

// valueReconciler reads each ConfigMap's "v" and hands it to record with the cluster and
// the object's name (a deleted object records nothing).
func valueReconciler(mgr mcmanager.Manager, record func(cluster, name string, v uint64)) mcreconcile.Func {
	return func(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
		cl, err := mgr.GetCluster(ctx, req.ClusterName)
		if err != nil {
			return ctrl.Result{}, err
		}
		cm := &corev1.ConfigMap{}
		if err := cl.GetClient().Get(ctx, req.NamespacedName, cm); err != nil {
			return ctrl.Result{}, nil // deleted: nothing to record
		}
		v, _ := strconv.ParseUint(cm.Data["v"], 10, 64)
		record(string(req.ClusterName), req.Name, v)
		return ctrl.Result{}, nil
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "go-peer: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	dir := flag.String("kubeconfig-dir", "", "directory of <cluster>.kubeconfig files written by mcr-envtest")
	host := flag.String("host", "member-1.kubeconfig", "file in -kubeconfig-dir for the manager's host cluster (not a fleet member)")
	objects := flag.Int("objects", 10, "ConfigMaps per member cluster")
	rounds := flag.Uint64("rounds", 20, "the last value the loader writes")
	concurrency := flag.Int("concurrency", 16, "MaxConcurrentReconciles")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	shardedMode := flag.Bool("sharded", false, "run as one replica under the sharded coordinator (B12)")
	identity := flag.String("identity", "", "-sharded: this replica's peer identity (default: the hostname, as the coordinator's own default)")
	hostKubeconfig := flag.String("host-kubeconfig", "", "-sharded: the host cluster's kubeconfig (where the Leases live); -kubeconfig-dir and its subdirectories hold only fleet members")
	verbose := flag.Bool("log", false, "-sharded: log the manager and the coordinator to stderr (debugging)")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	if *shardedMode {
		log := logr.Discard()
		if *verbose {
			log = funcr.New(func(prefix, args string) {
				fmt.Fprintln(os.Stderr, prefix, args)
			}, funcr.Options{Verbosity: 1})
			ctrllog.SetLogger(log)
		}
		runSharded(*dir, *hostKubeconfig, *identity, *concurrency, log)
		return
	}

	matches, err := filepath.Glob(filepath.Join(*dir, "*.kubeconfig"))
	if err != nil || len(matches) == 0 {
		fail("no kubeconfig in %q (%v)", *dir, err)
	}
	sort.Strings(matches)
	hostPath := filepath.Join(*dir, *host)
	var members []string
	for _, m := range matches {
		if m != hostPath {
			members = append(members, m)
		}
	}
	hostCfg, err := clientcmd.BuildConfigFromFlags("", hostPath)
	if err != nil {
		fail("host kubeconfig %s: %v", hostPath, err)
	}
	mgr := newManager(hostCfg, members)

	p := &probe{seen: map[string]uint64{}, rises: map[rise][][2]any{}}
	initial := p.expect(0, len(members)**objects)
	reconciler := valueReconciler(mgr, func(cluster, name string, v uint64) {
		p.observe(cluster, name, v)
	})
	err = mcbuilder.ControllerManagedBy(mgr).
		Named("bench-0").
		For(&corev1.ConfigMap{}).
		WithOptions(controller.TypedOptions[mcreconcile.Request]{MaxConcurrentReconciles: *concurrency}).
		Complete(reconciler)
	if err != nil {
		fail("controller: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	go func() {
		if err := mgr.Start(ctx); err != nil && ctx.Err() == nil {
			fail("manager stopped: %v", err)
		}
	}()
	wait := func(what string, ch chan struct{}) {
		select {
		case <-ch:
		case <-ctx.Done():
			fail("timed out waiting for %s", what)
		}
	}
	wait("the initial sync", initial)
	p.mu.Lock()
	p.record = true
	p.mu.Unlock()
	last := p.expect(*rounds, len(members)**objects)
	rssReady, _ := memory()
	cpuReady := cpuSeconds()
	fmt.Println("READY")
	wait("every last value", last)
	fmt.Println("DONE")
	cpuDone := cpuSeconds()
	rssDone, hwm := memory()
	p.mu.Lock()
	rises := make([]any, 0, len(p.rises))
	for r, list := range p.rises {
		rises = append(rises, []any{r.cluster, r.object, list})
	}
	p.mu.Unlock()
	out, _ := json.Marshal(map[string]any{
		"rises": rises,
		"side":  "go", "clusters": len(members), "objects": *objects, "rounds": *rounds,
		"rss_kib_ready": rssReady, "rss_kib_done": rssDone, "vm_rss_kib": rssDone, "vm_hwm_kib": hwm,
		"cpu_s_ready": cpuReady, "cpu_s_done": cpuDone,
	})
	fmt.Printf("RESULT %s\n", out)
	os.Exit(0)
}

// countingAware counts the clusters the coordinator has engaged in this replica (each
// engagement's context ends when the coordinator stops the cluster here).
type countingAware struct{ n atomic.Int64 }

func (a *countingAware) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

func (a *countingAware) Engage(ctx context.Context, _ multicluster.ClusterName, _ cluster.Cluster) error {
	a.n.Add(1)
	go func() {
		<-ctx.Done()
		a.n.Add(-1)
	}()
	return nil
}

// runSharded is the -sharded mode (see the package docs); it returns never: the process
// exits when its stdin closes, or is killed.
func runSharded(dir, hostPath, identity string, concurrency int, log logr.Logger) {
	if hostPath == "" {
		fail("-sharded needs -host-kubeconfig")
	}
	var members []string
	for _, pattern := range []string{"*.kubeconfig", "*/*.kubeconfig"} {
		m, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			fail("listing %q: %v", dir, err)
		}
		members = append(members, m...)
	}
	if len(members) == 0 {
		fail("no kubeconfig in %q or its subdirectories", dir)
	}
	sort.Strings(members)
	hostCfg, err := clientcmd.BuildConfigFromFlags("", hostPath)
	if err != nil {
		fail("host kubeconfig %s: %v", hostPath, err)
	}
	// No client-side rate limit on the host, as ctrl.GetConfig sets it (QPS -1): the
	// coordinator renews one fence Lease per owned cluster, which client-go's default 5 QPS
	// could not keep up with at this fleet's size.
	hostCfg.QPS = -1
	// JSON for the Leases: client-go sends built-in types as protobuf, which the emulator
	// decodes only for a few kinds, not Lease.
	leaseCfg := rest.CopyConfig(hostCfg)
	leaseCfg.ContentType = "application/json"
	leaseCfg.AcceptContentTypes = "application/json"
	kube, err := client.New(leaseCfg, client.Options{})
	if err != nil {
		fail("host client: %v", err)
	}
	// The default peer registry with an explicit identity (the coordinator's own default is
	// the hostname, the same for every replica on one machine); namespace, prefix and weight
	// are the coordinator's defaults.
	registry := peers.NewLeaseRegistry(kube, "kube-system", "mcr-peer", identity, 1, log)
	coordinator := sharded.New(kube, log, sharded.WithPeerRegistry(registry))
	mgr := newManager(hostCfg, members, mcmanager.WithCoordinator(coordinator))
	var stdout sync.Mutex
	reconciler := valueReconciler(mgr, func(cluster, _ string, v uint64) {
		stdout.Lock()
		fmt.Printf("SEEN %s %d %d\n", cluster, v, time.Now().UnixNano())
		stdout.Unlock()
	})
	err = mcbuilder.ControllerManagedBy(mgr).
		Named("b12").
		For(&corev1.ConfigMap{}).
		WithOptions(controller.TypedOptions[mcreconcile.Request]{MaxConcurrentReconciles: concurrency}).
		Complete(reconciler)
	if err != nil {
		fail("controller: %v", err)
	}
	owned := &countingAware{}
	if err := mgr.Add(owned); err != nil {
		fail("counting aware: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		if err := mgr.Start(ctx); err != nil && ctx.Err() == nil {
			fail("manager stopped: %v", err)
		}
	}()
	// Until stdin closes (the runner is done with this replica).
	go func() {
		buf := make([]byte, 64)
		for {
			if _, err := os.Stdin.Read(buf); err != nil {
				cancel()
				return
			}
		}
	}()
	last := int64(-1)
	for ctx.Err() == nil {
		if n := owned.n.Load(); n != last {
			last = n
			stdout.Lock()
			fmt.Printf("OWNED %d\n", n)
			stdout.Unlock()
		}
		time.Sleep(100 * time.Millisecond)
	}
	os.Exit(0)
}
