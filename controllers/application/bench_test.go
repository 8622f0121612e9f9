package application

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/capacity"
	"github.com/celld/celld-operator/controllers/celld"
)

// fleetOfServers starts n /state servers on distinct loopback addresses (127.0.9.1…) sharing one
// port, as members share 8081 on distinct pod IPs; each answers body after latency.
func fleetOfServers(b *testing.B, n int, latency time.Duration, body []byte) (ips []string, port int) {
	b.Helper()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // the member's own response time, cut short if the reader gives up
		case <-time.After(latency):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	for attempt := 0; attempt < 5; attempt++ {
		var ls []net.Listener
		first, err := net.Listen("tcp", "127.0.9.1:0")
		if err != nil {
			b.Fatal(err)
		}
		port = first.Addr().(*net.TCPAddr).Port
		ls = append(ls, first)
		for i := 1; i < n && err == nil; i++ {
			var l net.Listener
			if l, err = net.Listen("tcp", fmt.Sprintf("127.0.%d.%d:%d", 9+i/250, 1+i%250, port)); err == nil {
				ls = append(ls, l)
			}
		}
		if err != nil { // the port is taken on another loopback address: start over
			for _, l := range ls {
				_ = l.Close()
			}
			continue
		}
		ips = ips[:0]
		for _, l := range ls {
			srv := &http.Server{Handler: handler, ReadHeaderTimeout: time.Second}
			go func() { _ = srv.Serve(l) }()
			b.Cleanup(func() { _ = srv.Close() })
			ips = append(ips, l.Addr().(*net.TCPAddr).IP.String())
		}
		return ips, port
	}
	b.Fatal("no free port on the loopback addresses")
	return nil, 0
}

// stateBody is a valid /state document of about size bytes: a deployment plus padding in a
// field the decoder skips, as a node with a large census would send.
func stateBody(size int) []byte {
	doc := `{"deployment":{"cells":{"Cell:a":1},"generation":1,"prefix":"deploy/app/v1","swapping":0,"version":"v1"},` +
		`"shutdown":{"runtime_generation":"g","schema_version":1},"pad":"`
	pad := max(size-len(doc)-2, 0)
	return []byte(doc + strings.Repeat("x", pad) + `"}`)
}

func benchmarkSweep(b *testing.B, members int, latency time.Duration, body []byte) {
	ips, port := fleetOfServers(b, members, latency, body)
	client := celld.NewClient(celld.WithPort(uint16(port)))
	defer client.CloseIdleConnections()
	o := New(nil, nil, nil, Options{Reader: client})
	started := time.Now().Add(-time.Minute)
	inv := make([]member, len(ips))
	for i, ip := range ips {
		inv[i] = member{name: fmt.Sprintf("f-%03d", i), uid: "u", identity: "u/c/0", ip: ip, ready: true, started: started}
	}
	var slowest time.Duration
	b.ResetTimer()
	for b.Loop() {
		t := time.Now()
		got := o.sample(context.Background(), inv)
		slowest = max(slowest, time.Since(t))
		r := Aggregate(Facts{Now: time.Now(), MaxAge: o.opts.MaxAge, Expected: int32(members), Members: got})
		if r.Reason != v1.ReasonConverged || r.Application.ObservedNodes != int32(members) {
			b.Fatalf("sweep %s/%s with %d of %d observed, want every member read: %+v", r.Status, r.Reason,
				r.Application.ObservedNodes, members, r.Application.Nodes[0])
		}
	}
	b.ReportMetric(slowest.Seconds(), "slowest-sweep-s")
	if slowest >= o.opts.Deadline {
		b.Fatalf("slowest sweep %s, not inside the %s collection deadline", slowest, o.opts.Deadline)
	}
}

// BenchmarkSweep100Members20ms: 100 members answering in 20 ms each, read 8 at a time, must
// finish well inside the 10 s deadline (ideal: 13 rounds of 20 ms).
func BenchmarkSweep100Members20ms(b *testing.B) {
	benchmarkSweep(b, 100, 20*time.Millisecond, stateBody(2<<10))
}

// BenchmarkSweep100Members1MiB: the same sweep with bodies just under the 1 MiB limit. Memory
// stays bounded by the client's pooled read buffers (one per reader), not by members × 1 MiB.
func BenchmarkSweep100Members1MiB(b *testing.B) {
	benchmarkSweep(b, 100, 20*time.Millisecond, stateBody(celld.MaxBody-64))
}

// BenchmarkCapacityCollection100Members: a capacity fleet's whole collection of 100 members
// (the /state sweep, 20 ms each, with one PodMetrics list alongside, then the samples built
// from both) must finish inside the 10 s deadline, and costs one Metrics API request.
func BenchmarkCapacityCollection100Members(b *testing.B) {
	ips, port := fleetOfServers(b, 100, 20*time.Millisecond, stateBody(2<<10))
	client := celld.NewClient(celld.WithPort(uint16(port)))
	defer client.CloseIdleConnections()
	started := time.Now().Add(-time.Minute)
	inv := inventory{members: make([]member, len(ips))}
	lister := &fakeMetrics{}
	for i, ip := range ips {
		name := fmt.Sprintf("f-%03d", i)
		inv.members[i] = member{name: name, uid: "u" + name, identity: "u" + name + "/c/0", ip: ip, ready: true, started: started}
		lister.items = append(lister.items, podMetricsOf(name, time.Now(), "120m", "300Mi"))
	}
	f := &v1.CelldFleet{Spec: v1.CelldFleetSpec{Capacity: &v1.CapacityPolicy{}}}
	o := New(nil, nil, nil, Options{Reader: client, Metrics: lister, Capacity: func(types.NamespacedName, types.UID, *capacity.Observation) {}})
	var slowest time.Duration
	b.ResetTimer()
	for b.Loop() {
		t := time.Now()
		pm := o.listPodMetrics(context.Background(), f)
		read := o.sample(context.Background(), inv.members)
		obs := capacityObservation(time.Now(), inv, read, <-pm, true)
		slowest = max(slowest, time.Since(t))
		if obs.Samples[99].MetricsAt.IsZero() || obs.Samples[99].CPUMillicores != 120 {
			b.Fatalf("every member must be sampled: %+v", obs.Samples[99])
		}
	}
	b.ReportMetric(slowest.Seconds(), "slowest-collection-s")
	b.ReportMetric(float64(lister.calls)/float64(b.N), "metrics-requests/op")
	if slowest >= o.opts.Deadline {
		b.Fatalf("slowest collection %s, not inside the %s deadline", slowest, o.opts.Deadline)
	}
}
