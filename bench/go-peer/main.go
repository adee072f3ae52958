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
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
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
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())

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
	provider, err := file.New(file.Options{KubeconfigFiles: members})
	if err != nil {
		fail("file provider: %v", err)
	}
	mgr, err := mcmanager.New(hostCfg, provider, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		fail("manager: %v", err)
	}

	p := &probe{seen: map[string]uint64{}, rises: map[rise][][2]any{}}
	initial := p.expect(0, len(members)**objects)
	reconciler := mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
		cl, err := mgr.GetCluster(ctx, req.ClusterName)
		if err != nil {
			return ctrl.Result{}, err
		}
		cm := &corev1.ConfigMap{}
		if err := cl.GetClient().Get(ctx, req.NamespacedName, cm); err != nil {
			return ctrl.Result{}, nil // deleted: nothing to record
		}
		v, _ := strconv.ParseUint(cm.Data["v"], 10, 64)
		p.observe(string(req.ClusterName), req.Name, v)
		return ctrl.Result{}, nil
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
