package application

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
)

// BenchmarkStatusWriteOnTheAPIServer measures, on a real kube-apiserver (one request at a
// time, so a request's time is mostly the server's work), what one status write of a fleet
// costs next to a write of a ConfigMap holding the same bytes. Every write changes a count,
// as the writes of a fleet coming up do.
//
//	KUBEBUILDER_ASSETS=$PWD/bin go test -run='^$' -bench=StatusWriteOnTheAPIServer -benchtime=300x ./controllers/application
func BenchmarkStatusWriteOnTheAPIServer(b *testing.B) {
	c := env.Client(b)
	ctx := b.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "apicost-"}}
	if err := c.Create(ctx, ns); err != nil {
		b.Fatal(err)
	}
	f := corpus.Persistent()
	f.Namespace, f.Name = ns.Name, "f"
	if err := c.Create(ctx, f); err != nil {
		b.Fatal(err)
	}
	observed := func(i int) Result {
		r := Result{Status: metav1.ConditionUnknown, Reason: v1.ReasonIncompleteCoverage, Generation: f.Generation}
		r.Application = v1.ApplicationStatus{ExpectedNodes: 3, ObservedNodes: int32(i%3 + 1), UnavailableNodes: int32(2 - i%3)}
		for j := range 3 {
			r.Application.Nodes = append(r.Application.Nodes, v1.ApplicationNode{Name: fmt.Sprintf("f-%d", j), UID: "uid", Reason: NodeUnavailable})
		}
		return r
	}
	b.Run("CelldFleet status, server-side apply", func(b *testing.B) {
		for i := range b.N {
			live := &v1.CelldFleet{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(f), live); err != nil {
				b.Fatal(err)
			}
			cfg, err := applyObject(live, observed(i), time.Now())
			if err != nil {
				b.Fatal(err)
			}
			cfg.ResourceVersion = nil // the benchmark is the only writer
			if err := c.Status().Apply(ctx, cfg, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ConfigMap of the fleet's size, server-side apply", func(b *testing.B) {
		live := &v1.CelldFleet{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(f), live); err != nil {
			b.Fatal(err)
		}
		size := len(fmt.Sprint(live.Spec)) + len(fmt.Sprint(live.Status))
		for i := range b.N {
			cm := corev1ac.ConfigMap("cm", ns.Name).WithData(map[string]string{
				"body": strings.Repeat("x", size), "count": fmt.Sprint(i)})
			if err := c.Apply(ctx, cm, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read of the fleet (the apply's precondition read, for scale)", func(b *testing.B) {
		for range b.N {
			if err := c.Get(ctx, client.ObjectKeyFromObject(f), &v1.CelldFleet{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
