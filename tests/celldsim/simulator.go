package celldsim

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Options configures a Simulator.
type Options struct {
	// Client patches pod status and deletes drained pods.
	Client kubernetes.Interface
	// ManagedNodeLabel=ManagedNodeValue marks nodes whose "kubelet" is alive. Pods on other
	// nodes are powered off: nothing listens on their IP, nothing patches or deletes them.
	// Empty means every node is alive.
	ManagedNodeLabel, ManagedNodeValue string
	// ProbePeriod is the readiness probe period. Default 300 ms, so Ready follows a healthy
	// answer within about half a second, and a failing health route (failureThreshold
	// consecutive failures, readiness.go) within about a second.
	ProbePeriod time.Duration
	// Log receives one line per lifecycle event. Default: discarded.
	Log io.Writer
}

// Simulator runs the simulated celld processes of every fleet pod. Create it with Start.
type Simulator struct {
	o       Options
	log     *log.Logger
	probe   *http.Client
	stalls  stallWatch // when this process was not scheduled (readiness.go)
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	members map[types.UID]*member
	alive   map[string]bool // node name -> kwok manages it
}

// Start watches fleet pods and nodes and returns once the caches are synced.
func Start(ctx context.Context, o Options) (*Simulator, error) {
	if o.ProbePeriod <= 0 {
		o.ProbePeriod = 300 * time.Millisecond
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s := &Simulator{
		o: o, log: log.New(o.Log, "celldsim ", log.LstdFlags|log.Lmicroseconds), cancel: cancel,
		// like the kubelet's probe: 1 s timeout, no keep-alive so a closed listener shows at once
		probe:   &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
		members: map[types.UID]*member{}, alive: map[string]bool{},
	}
	pods := informers.NewSharedInformerFactoryWithOptions(o.Client, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.LabelSelector = FleetLabel
	}))
	nodes := informers.NewSharedInformerFactory(o.Client, 0)
	_, _ = nodes.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.nodeChanged(obj.(*corev1.Node)) },
		UpdateFunc: func(_, obj any) { s.nodeChanged(obj.(*corev1.Node)) },
	})
	_, _ = pods.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.podChanged(obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { s.podChanged(obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				s.podGone(p)
			}
		},
	})
	// nodes first: a pod's member must know whether its node is alive when it is created
	nodes.Start(runCtx.Done())
	for typ, ok := range nodes.WaitForCacheSync(ctx.Done()) {
		if !ok {
			cancel()
			return nil, fmt.Errorf("%v cache not synced", typ)
		}
	}
	pods.Start(runCtx.Done())
	for typ, ok := range pods.WaitForCacheSync(ctx.Done()) {
		if !ok {
			cancel()
			return nil, fmt.Errorf("%v cache not synced", typ)
		}
	}
	s.wg.Add(2)
	go func() { defer s.wg.Done(); <-runCtx.Done(); nodes.Shutdown(); pods.Shutdown() }()
	go func() { defer s.wg.Done(); s.stalls.run(runCtx) }()
	return s, nil
}

// Stop ends every simulated process (closing its listeners) and the watches.
func (s *Simulator) Stop() {
	s.cancel()
	s.mu.Lock()
	ms := make([]*member, 0, len(s.members))
	for _, m := range s.members {
		ms = append(ms, m)
	}
	s.mu.Unlock()
	for _, m := range ms {
		m.stop()
	}
	s.wg.Wait()
}

// Phase reports the simulated phase of a pod's process ("" if the simulator has no member
// for it), for tests that want to wait on the simulator rather than on the API.
func (s *Simulator) Phase(uid types.UID) string {
	s.mu.Lock()
	m := s.members[uid]
	s.mu.Unlock()
	if m == nil {
		return ""
	}
	return m.phaseName()
}

func (s *Simulator) nodeChanged(n *corev1.Node) {
	alive := s.o.ManagedNodeLabel == "" || n.Labels[s.o.ManagedNodeLabel] == s.o.ManagedNodeValue
	s.mu.Lock()
	was, known := s.alive[n.Name]
	s.alive[n.Name] = alive
	var affected []*member
	if known && was != alive {
		for _, m := range s.members {
			if m.nodeName() == n.Name {
				affected = append(affected, m)
			}
		}
	}
	s.mu.Unlock()
	if known && was != alive {
		s.log.Printf("node %s alive=%v (%d fleet pods)", n.Name, alive, len(affected))
	}
	for _, m := range affected {
		m.setPowered(alive)
	}
}

func (s *Simulator) podChanged(p *corev1.Pod) {
	if p.Status.PodIP == "" || p.Spec.NodeName == "" {
		return // kwok has not started it yet
	}
	s.mu.Lock()
	m := s.members[p.UID]
	alive, known := s.alive[p.Spec.NodeName]
	if m == nil {
		m = newMember(s, p, known && alive)
		s.members[p.UID] = m
	}
	s.mu.Unlock()
	m.update(p)
}

func (s *Simulator) podGone(p *corev1.Pod) {
	s.mu.Lock()
	m := s.members[p.UID]
	delete(s.members, p.UID)
	s.mu.Unlock()
	if m != nil {
		m.stop()
	}
}
