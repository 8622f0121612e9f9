package reservation

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Seed is where a seeded preview fleet's start stands, judged from its reservation alone.
type Seed int

const (
	// SeedStart: nothing holds the fleet back (no seed, or the gate is open).
	SeedStart Seed = iota
	// SeedOpen: the seed succeeded and its manifest matches the request; the operator opens
	// the gate (annotation seed-gate Open, written with the read's resourceVersion), then
	// starts the fleet.
	SeedOpen
	// SeedWait: no executor claimed the seed yet, or it is running.
	SeedWait
	// SeedRefused: the seed failed, was cancelled, reported a manifest that does not match the
	// request, or the gate was closed: the fleet never starts on this prefix.
	SeedRefused
)

// SeedGate is the start decision of a seeded fleet and the message that explains it.
type SeedGate struct {
	State   Seed
	Message string
}

// GateOf decides whether the fleet that holds res, and asks for seed want (its
// spec.storage.seed), may start. The reservation decides: its spec.seed is the request, frozen
// at creation, its status.seed the executor's answer, its seed-gate annotation the operator's
// decision. A request that differs from the fleet's (a reservation written by hand) never
// starts the fleet.
func GateOf(res *v1.CelldStorageReservation, want *v1.SeedRequest) SeedGate {
	req := res.Spec.Seed
	if !equality.Semantic.DeepEqual(req, want) {
		return SeedGate{State: SeedRefused, Message: fmt.Sprintf("The seed request on CelldStorageReservation %s is not the one CelldFleet %s/%s asks for (spec.storage.seed), and reservations are written only by the operator; the fleet does not start. %s",
			res.Name, res.Spec.FleetNamespace, res.Spec.FleetName, newPreview(res))}
	}
	if req == nil {
		return SeedGate{State: SeedStart}
	}
	switch res.Annotations[v1.AnnotationSeedGate] {
	case v1.SeedGateOpen:
		return SeedGate{State: SeedStart}
	case v1.SeedGateClosed:
		return SeedGate{State: SeedRefused, Message: fmt.Sprintf("The seed gate of CelldStorageReservation %s is Closed: the fleet was deleted before it started, and it never starts on this prefix. %s", res.Name, newPreview(res))}
	}
	fleet := res.Spec.FleetNamespace + "/" + res.Spec.FleetName
	var got v1.SeedResult
	if res.Status.Seed != nil {
		got = *res.Status.Seed
	}
	switch got.Phase {
	case "":
		return SeedGate{State: SeedWait, Message: fmt.Sprintf("CelldFleet %s waits for executor %s to claim its seed (%d objects from source %s) on CelldStorageReservation %s; nothing starts until the seed succeeded. If it stays unclaimed, check that executor %s runs and may update celldstoragereservations/status",
			fleet, req.Executor, len(req.Objects), req.Source, res.Name, req.Executor)}
	case v1.SeedRunning:
		return SeedGate{State: SeedWait, Message: fmt.Sprintf("CelldFleet %s waits for executor %s (worker %s) to finish copying %d objects from source %s into its prefix (CelldStorageReservation %s)%s",
			fleet, req.Executor, got.ExecutorID, len(req.Objects), req.Source, res.Name, quoted(got.Message))}
	case v1.SeedFailed, v1.SeedCanceled:
		return SeedGate{State: SeedRefused, Message: fmt.Sprintf("The seed of CelldFleet %s is %s (executor %s%s, CelldStorageReservation %s)%s; a seed is never retried on the same prefix. %s",
			fleet, got.Phase, req.Executor, worker(got), res.Name, quoted(got.Message), newPreview(res))}
	case v1.SeedSucceeded:
		if err := VerifyManifest(req, got.Objects); err != nil {
			return SeedGate{State: SeedRefused, Message: fmt.Sprintf("Executor %s%s reported the seed of CelldFleet %s Succeeded, but %v (CelldStorageReservation %s); the fleet does not start on a copy it cannot verify. Report it to the executor's owner. %s",
				req.Executor, worker(got), fleet, err, res.Name, newPreview(res))}
		}
		return SeedGate{State: SeedOpen, Message: fmt.Sprintf("The seed of CelldFleet %s succeeded (%d objects, executor %s%s); starting", fleet, len(got.Objects), req.Executor, worker(got))}
	}
	return SeedGate{State: SeedRefused, Message: fmt.Sprintf("CelldStorageReservation %s reports seed phase %q, which this release does not know; the fleet does not start. %s", res.Name, got.Phase, newPreview(res))}
}

func newPreview(res *v1.CelldStorageReservation) string {
	name := "the preview"
	if s := res.Spec.Seed; s != nil && s.Preview.Name != "" {
		name = fmt.Sprintf("CelldPreview %s/%s", res.Spec.FleetNamespace, s.Preview.Name)
	}
	return fmt.Sprintf("Delete %s and create a new one", name)
}

func worker(got v1.SeedResult) string {
	if got.ExecutorID == "" {
		return ""
	}
	return ", worker " + got.ExecutorID
}

func quoted(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

// VerifyManifest checks that a successful seed copied every requested object exactly once and
// nothing else: the operator verifies identity and completeness, never the copied bytes.
func VerifyManifest(req *v1.SeedRequest, got []v1.SeededObject) error {
	type key struct{ class, id string }
	want := make(map[key]bool, len(req.Objects))
	for _, o := range req.Objects {
		want[key{o.Class, o.ID}] = true
	}
	seen := make(map[key]bool, len(got))
	var extra, twice, missing []string
	for _, o := range got {
		k := key{o.Class, o.ID}
		switch {
		case !want[k]:
			extra = append(extra, o.Class+"/"+o.ID)
		case seen[k]:
			twice = append(twice, o.Class+"/"+o.ID)
		}
		seen[k] = true
	}
	for k := range want {
		if !seen[k] {
			missing = append(missing, k.class+"/"+k.id)
		}
	}
	var why []string
	for _, p := range []struct {
		what string
		list []string
	}{{"misses", missing}, {"lists objects not requested", extra}, {"lists twice", twice}} {
		if len(p.list) > 0 {
			sort.Strings(p.list)
			why = append(why, p.what+" "+strings.Join(p.list, ", "))
		}
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("its manifest %s", strings.Join(why, "; "))
}

// CancelStep is the next step of cancelling the seed of a fleet being deleted.
type CancelStep int

const (
	// CancelNone: there is nothing to cancel (no seed, or the gate is open: the fleet started,
	// and its normal shutdown applies).
	CancelNone CancelStep = iota
	// CancelUnclaimed: no executor claimed the seed; the operator records it Canceled itself.
	CancelUnclaimed
	// CancelRequest: an executor runs the seed; the operator asks it to stop.
	CancelRequest
	// CancelWait: the executor has not acknowledged the cancellation yet.
	CancelWait
	// CancelClose: the seed is final; the operator closes the gate, so the fleet never starts.
	CancelClose
	// CancelDone: the gate is closed; deletion proceeds.
	CancelDone
)

// CancelOf is the next cancellation step of the seeded fleet that holds res.
func CancelOf(res *v1.CelldStorageReservation) CancelStep {
	if res.Spec.Seed == nil {
		return CancelNone
	}
	switch res.Annotations[v1.AnnotationSeedGate] {
	case v1.SeedGateOpen:
		return CancelNone
	case v1.SeedGateClosed:
		return CancelDone
	}
	got := res.Status.Seed
	switch {
	case got == nil || got.Phase == "":
		return CancelUnclaimed
	case got.Phase.Terminal():
		return CancelClose
	case got.CancelRequestedAt == nil:
		return CancelRequest
	}
	return CancelWait
}

// Cancelled is res's seed result after the operator's cancellation step (CancelUnclaimed or
// CancelRequest) at now; the caller writes it to the status subresource with res's
// resourceVersion.
func Cancelled(res *v1.CelldStorageReservation, step CancelStep, now time.Time) *v1.SeedResult {
	out := &v1.SeedResult{}
	if res.Status.Seed != nil {
		out = res.Status.Seed.DeepCopy()
	}
	at := metav1.NewTime(now.UTC().Truncate(time.Second))
	out.CancelRequestedAt = &at
	if step == CancelUnclaimed {
		out.Phase = v1.SeedCanceled
		out.CompletedAt = &at
		out.Message = "Cancelled by the operator before any executor claimed it: the fleet was deleted"
	}
	return out
}
