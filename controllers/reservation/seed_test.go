package reservation

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

func seedRequest() *v1.SeedRequest {
	return &v1.SeedRequest{
		Executor: "snapshot", Source: "staging", Alarms: "Clear",
		SourceFleet: v1.SeedFleetRef{Namespace: "prod", Name: "shop", UID: "u-1"},
		Objects:     []v1.SeedObject{{Class: "Cart", ID: "c-1"}, {Class: "Customer", ID: "k-2"}},
		Preview:     v1.SeedPreviewRef{Name: "checkout", UID: "p-1"},
	}
}

func seeded(result *v1.SeedResult, gate string) *v1.CelldStorageReservation {
	r := &v1.CelldStorageReservation{
		ObjectMeta: metav1.ObjectMeta{Name: "s3-scope-x"},
		Spec:       v1.CelldStorageReservationSpec{FleetNamespace: "dev", FleetName: "p-1", Seed: seedRequest()},
		Status:     v1.CelldStorageReservationStatus{Seed: result},
	}
	if gate != "" {
		r.Annotations = map[string]string{v1.AnnotationSeedGate: gate}
	}
	return r
}

const digestA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

func manifest(keys ...string) []v1.SeededObject {
	var out []v1.SeededObject
	for _, k := range keys {
		class, id, _ := strings.Cut(k, "/")
		out = append(out, v1.SeededObject{Class: class, ID: id, Digest: digestA})
	}
	return out
}

func TestGateOf(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	cases := []struct {
		name  string
		res   *v1.CelldStorageReservation
		want  *v1.SeedRequest
		state Seed
		says  []string
	}{
		{"no seed starts", &v1.CelldStorageReservation{}, nil, SeedStart, nil},
		{"unclaimed waits", seeded(nil, ""), seedRequest(), SeedWait, []string{"executor snapshot to claim", "2 objects", "celldstoragereservations/status"}},
		{"empty phase waits", seeded(&v1.SeedResult{}, ""), seedRequest(), SeedWait, []string{"to claim"}},
		{"running waits", seeded(&v1.SeedResult{Phase: v1.SeedRunning, ExecutorID: "w-7", Message: "copying"}, ""), seedRequest(), SeedWait, []string{"worker w-7", "finish copying", ": copying"}},
		{"success with the full manifest opens", seeded(&v1.SeedResult{Phase: v1.SeedSucceeded, ExecutorID: "w-7", Objects: manifest("Cart/c-1", "Customer/k-2")}, ""), seedRequest(), SeedOpen, []string{"succeeded (2 objects"}},
		{"an open gate starts", seeded(&v1.SeedResult{Phase: v1.SeedSucceeded, Objects: manifest("Cart/c-1", "Customer/k-2")}, v1.SeedGateOpen), seedRequest(), SeedStart, nil},
		{"an open gate starts whatever the status says", seeded(nil, v1.SeedGateOpen), seedRequest(), SeedStart, nil},
		{"a closed gate refuses", seeded(&v1.SeedResult{Phase: v1.SeedSucceeded, Objects: manifest("Cart/c-1", "Customer/k-2")}, v1.SeedGateClosed), seedRequest(), SeedRefused, []string{"Closed", "CelldPreview dev/checkout"}},
		{"failure refuses", seeded(&v1.SeedResult{Phase: v1.SeedFailed, ExecutorID: "w-7", Message: "source unreachable"}, ""), seedRequest(), SeedRefused, []string{"is Failed", "worker w-7", "source unreachable", "never retried", "Delete CelldPreview dev/checkout"}},
		{"cancellation refuses", seeded(&v1.SeedResult{Phase: v1.SeedCanceled, CancelRequestedAt: &now}, ""), seedRequest(), SeedRefused, []string{"is Canceled"}},
		{"a short manifest refuses", seeded(&v1.SeedResult{Phase: v1.SeedSucceeded, Objects: manifest("Cart/c-1")}, ""), seedRequest(), SeedRefused, []string{"misses Customer/k-2", "cannot verify"}},
		{"an unknown phase refuses", seeded(&v1.SeedResult{Phase: "Paused"}, ""), seedRequest(), SeedRefused, []string{`"Paused"`}},
		{"a request other than the fleet's refuses", seeded(nil, ""), func() *v1.SeedRequest { r := seedRequest(); r.Objects = r.Objects[:1]; return r }(), SeedRefused, []string{"not the one CelldFleet dev/p-1 asks for"}},
		{"a seed the fleet does not ask for refuses", seeded(nil, ""), nil, SeedRefused, []string{"not the one"}},
		{"a fleet seed missing on the reservation refuses", &v1.CelldStorageReservation{}, seedRequest(), SeedRefused, []string{"not the one"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := GateOf(c.res, c.want)
			if g.State != c.state {
				t.Fatalf("state %d, want %d (%s)", g.State, c.state, g.Message)
			}
			for _, s := range c.says {
				if !strings.Contains(g.Message, s) {
					t.Errorf("message %q does not say %q", g.Message, s)
				}
			}
		})
	}
}

func TestVerifyManifest(t *testing.T) {
	req := seedRequest()
	cases := []struct {
		name string
		got  []v1.SeededObject
		err  string
	}{
		{"exact", manifest("Customer/k-2", "Cart/c-1"), ""},
		{"missing", manifest("Cart/c-1"), "misses Customer/k-2"},
		{"none", nil, "misses Cart/c-1, Customer/k-2"},
		{"extra", manifest("Cart/c-1", "Customer/k-2", "Cart/c-9"), "not requested Cart/c-9"},
		{"twice", manifest("Cart/c-1", "Customer/k-2", "Cart/c-1"), "twice Cart/c-1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := VerifyManifest(req, c.got)
			if c.err == "" {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("got %v, want %q", err, c.err)
			}
		})
	}
}

func TestCancelOf(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	cases := []struct {
		name string
		res  *v1.CelldStorageReservation
		step CancelStep
	}{
		{"no seed", &v1.CelldStorageReservation{}, CancelNone},
		{"open gate: normal shutdown", seeded(&v1.SeedResult{Phase: v1.SeedSucceeded}, v1.SeedGateOpen), CancelNone},
		{"closed gate: done", seeded(&v1.SeedResult{Phase: v1.SeedCanceled}, v1.SeedGateClosed), CancelDone},
		{"unclaimed", seeded(nil, ""), CancelUnclaimed},
		{"running", seeded(&v1.SeedResult{Phase: v1.SeedRunning, ExecutorID: "w"}, ""), CancelRequest},
		{"running, asked", seeded(&v1.SeedResult{Phase: v1.SeedRunning, ExecutorID: "w", CancelRequestedAt: &now}, ""), CancelWait},
		{"acknowledged", seeded(&v1.SeedResult{Phase: v1.SeedCanceled, CancelRequestedAt: &now}, ""), CancelClose},
		{"failed", seeded(&v1.SeedResult{Phase: v1.SeedFailed}, ""), CancelClose},
		{"succeeded, never opened", seeded(&v1.SeedResult{Phase: v1.SeedSucceeded}, ""), CancelClose},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := CancelOf(c.res); got != c.step {
				t.Fatalf("step %d, want %d", got, c.step)
			}
		})
	}
}

func TestCancelled(t *testing.T) {
	now := time.Date(2026, 12, 2, 1, 2, 3, 400, time.UTC)
	unclaimed := Cancelled(seeded(nil, ""), CancelUnclaimed, now)
	if unclaimed.Phase != v1.SeedCanceled || unclaimed.CancelRequestedAt == nil || unclaimed.CompletedAt == nil || unclaimed.ExecutorID != "" {
		t.Fatalf("unclaimed cancellation %+v", unclaimed)
	}
	running := seeded(&v1.SeedResult{Phase: v1.SeedRunning, ExecutorID: "w-7", Message: "copying"}, "")
	asked := Cancelled(running, CancelRequest, now)
	if asked.Phase != v1.SeedRunning || asked.ExecutorID != "w-7" || asked.Message != "copying" || asked.CompletedAt != nil ||
		!asked.CancelRequestedAt.Time.Equal(now.Truncate(time.Second)) {
		t.Fatalf("cancel request %+v", asked)
	}
	if running.Status.Seed.CancelRequestedAt != nil {
		t.Fatal("Cancelled wrote to the reservation it read")
	}
}
