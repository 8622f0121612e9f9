package children

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/tests/apiserver"
)

// The API-server tests share one etcd + kube-apiserver with the Gateway API HTTPRoute CRD and
// Istio's security CRDs installed, started on first use so the pure tests stay fast, and stopped
// by TestMain.
var env = apiserver.Shared{Dirs: []string{"controllers/children/testdata/crds"},
	Schemes: []func(*runtime.Scheme) error{clientgoscheme.AddToScheme}}

func TestMain(m *testing.M) {
	log.SetLogger(logr.Discard()) // the applier logs its writes; tests read results instead
	code := m.Run()
	env.Stop()
	os.Exit(code)
}

// apiServer returns a client of the package's API server, starting it once.
func apiServer(t testing.TB) client.Client { return env.Client(t) }

// newNamespace gives each test its own namespace, so tests never see each other's children.
func newNamespace(t testing.TB, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t-" + rand.String(8)}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// fleetIn loads a sample as a fleet in ns with a fresh UID, as the API server would assign.
func fleetIn(t testing.TB, sample, ns string) *v1.CelldFleet {
	t.Helper()
	f := loadSample(t, filepath.Join("..", "..", "config", "samples", sample+".yaml"))
	f.Namespace = ns
	f.UID = uuid.NewUUID()
	f.Generation = 1
	return f
}

// countingClient counts every write, so a test can assert that a settled fleet costs none.
type countingClient struct {
	client.Client
	writes  atomic.Int64
	dryRuns atomic.Int64
}

func (c *countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.writes.Add(1)
	return c.Client.Create(ctx, obj, opts...)
}

func (c *countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	uo := &client.UpdateOptions{}
	uo.ApplyOptions(opts)
	if len(uo.DryRun) > 0 {
		c.dryRuns.Add(1) // persists nothing: a comparison, not a write
		return c.Client.Update(ctx, obj, opts...)
	}
	c.writes.Add(1)
	return c.Client.Update(ctx, obj, opts...)
}

func (c *countingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.writes.Add(1)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *countingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	c.writes.Add(1)
	return c.Client.Apply(ctx, obj, opts...)
}

func (c *countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.writes.Add(1)
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *countingClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	c.writes.Add(1)
	return c.Client.DeleteAllOf(ctx, obj, opts...)
}

// eventually polls cond until it holds or the deadline passes; tests never sleep to synchronise.
func eventually(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return cond()
	})
	if err != nil {
		t.Fatalf("waiting until %s: %v", what, err)
	}
}
