package reservation

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

func TestScopesOverlapInBothDirections(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b Scope
		want bool
	}{
		{"a whole bucket and a prefix in it", Scope{"pv", ""}, Scope{"pv", "p-1"}, true},
		{"a whole bucket and itself", Scope{"pv", ""}, Scope{"pv", ""}, true},
		{"the same prefix", Scope{"pv", "p-1"}, Scope{"pv", "p-1"}, true},
		{"a prefix and one under it", Scope{"pv", "a"}, Scope{"pv", "a/b"}, true},
		{"a prefix and one under it, trailing slash", Scope{"pv", "a/"}, Scope{"pv", "a/b/"}, true},
		{"two sibling prefixes", Scope{"pv", "p-1"}, Scope{"pv", "p-2"}, false},
		{"a prefix that is a string prefix of another but another segment", Scope{"pv", "p-1"}, Scope{"pv", "p-10"}, false},
		{"the same prefix in two buckets", Scope{"pv", "p-1"}, Scope{"pw", "p-1"}, false},
		{"two whole buckets", Scope{"pv", ""}, Scope{"pw", ""}, false},
	} {
		if got := Overlaps(c.a, c.b); got != c.want {
			t.Errorf("%s: Overlaps(%v, %v) = %v, want %v", c.name, c.a, c.b, got, c.want)
		}
		if got := Overlaps(c.b, c.a); got != c.want {
			t.Errorf("%s: Overlaps(%v, %v) = %v, want %v (overlap is symmetric)", c.name, c.b, c.a, got, c.want)
		}
	}
}

func held(bucket, prefix string, kind v1.ReservationOwnerKind, uid string) v1.CelldStorageReservation {
	return v1.CelldStorageReservation{
		ObjectMeta: metav1.ObjectMeta{Name: Name(bucket, prefix)},
		Spec: v1.CelldStorageReservationSpec{OwnerKind: kind, Bucket: bucket, Prefix: prefix,
			InitialReplicas: 1, FleetNamespace: "apps", FleetName: "f-" + uid, FleetUID: uid, SpecHash: "h"},
	}
}

func TestAClaimConflictsWithEveryReservationSharingItsKeys(t *testing.T) {
	pool := held("pv", "", v1.ReservationOwnerFleetPreviews, "parent")
	dedicated := held("pv", "", "", "other")
	scope1 := held("pv", "p-1", "", "child-1")
	nested := held("pv", "p-2/x", "", "child-x")
	elsewhere := held("pw", "", "", "elsewhere")
	for _, c := range []struct {
		name   string
		want   v1.CelldStorageReservation
		others []v1.CelldStorageReservation
		hit    string // the conflicting reservation's name, "" for none
	}{
		{"a dedicated fleet in a bucket with a prefix scope", held("pv", "", "", "new"), []v1.CelldStorageReservation{elsewhere, scope1}, scope1.Name},
		{"a preview pool in a bucket with a prefix scope left by an earlier release", held("pv", "", v1.ReservationOwnerFleetPreviews, "new"), []v1.CelldStorageReservation{scope1}, scope1.Name},
		{"a prefix scope in a bucket held by a dedicated fleet", held("pv", "p-3", "", "c3"), []v1.CelldStorageReservation{dedicated}, dedicated.Name},
		{"a prefix scope in its pool, beside other prefixes", held("pv", "p-3", "", "c3"), []v1.CelldStorageReservation{pool, scope1, nested, elsewhere}, ""},
		{"a prefix scope above another one", held("pv", "p-2", "", "c2"), []v1.CelldStorageReservation{pool, nested}, nested.Name},
		{"a prefix scope below another one", held("pv", "p-1/deeper", "", "c4"), []v1.CelldStorageReservation{pool, scope1}, scope1.Name},
		{"a reservation is not its own conflict", scope1, []v1.CelldStorageReservation{pool, scope1}, ""},
		{"a whole bucket alone", held("pz", "", "", "new"), []v1.CelldStorageReservation{elsewhere}, ""},
	} {
		got := Conflict(&c.want, c.others)
		switch {
		case c.hit == "" && got != nil:
			t.Errorf("%s: want no conflict, got %s (%s)", c.name, got.Name, ScopeOf(got))
		case c.hit != "" && (got == nil || got.Name != c.hit):
			t.Errorf("%s: want a conflict with %s, got %v", c.name, c.hit, got)
		}
	}
}

func previewParent() *v1.CelldFleet {
	f := fixture()
	f.Spec.Previews = &v1.FleetPreviewsSpec{Storage: v1.PreviewStorage{Bucket: "celld-previews", Region: "us-east-1"}}
	return f
}

func previewChild(parent *v1.CelldFleet) *v1.CelldFleet {
	return &v1.CelldFleet{
		ObjectMeta: metav1.ObjectMeta{Namespace: parent.Namespace, Name: "p-1", UID: "child-uid"},
		Spec: v1.CelldFleetSpec{Profile: v1.ProfileBucket, Storage: v1.StorageSpec{
			Bucket: parent.Spec.Previews.Storage.Bucket, Region: "us-east-1", Prefix: "p-1",
			PreviewFleetRef: &v1.FleetReference{Name: parent.Name, UID: string(parent.UID)},
		}},
	}
}

func TestAPoolIsTheParentsPreviewBucketReservedToItsUID(t *testing.T) {
	parent := previewParent()
	pool := DesiredPool(parent)
	if pool.Name != Name("celld-previews", "") || pool.Spec.OwnerKind != v1.ReservationOwnerFleetPreviews ||
		pool.Spec.FleetUID != string(parent.UID) || pool.Spec.Bucket != "celld-previews" || pool.Spec.Prefix != "" || len(pool.OwnerReferences) != 0 {
		t.Fatalf("the pool must reserve the whole preview bucket (never the parent's own) to the parent UID, for previews, with no owner: %+v", pool)
	}
	if ok, why := PoolMatches(pool, parent); !ok {
		t.Fatalf("the parent's own pool must match: %s", why)
	}
	recreated := parent.DeepCopy()
	recreated.UID = "another-uid"
	dedicated := pool.DeepCopy()
	dedicated.Spec.OwnerKind = ""
	moved := parent.DeepCopy()
	moved.Spec.Previews.Storage.Region = "us-west-2"
	for _, c := range []struct {
		name    string
		res     *v1.CelldStorageReservation
		parent  *v1.CelldFleet
		mention string
	}{
		{"a parent recreated under the same name", pool, recreated, "UID " + string(parent.UID)},
		{"a bucket a fleet holds", dedicated, parent, "fleet apps/orders"},
		{"other preview storage", pool, moved, "preview storage differs"},
	} {
		ok, why := PoolMatches(c.res, c.parent)
		if ok || !strings.Contains(why, c.mention) {
			t.Errorf("%s: want no match mentioning %q, got %v %q", c.name, c.mention, ok, why)
		}
	}
	// A dedicated fleet on the preview bucket never matches the pool (the fleet's own rules).
	intruder := fixture()
	intruder.Name, intruder.UID = "intruder", "intruder-uid"
	intruder.Spec.Storage.Bucket = "celld-previews"
	if ok, why := Matches(pool, intruder); ok || !strings.Contains(why, "the previews of fleet apps/orders") {
		t.Errorf("a dedicated fleet must never use a reserved preview bucket, got %v %q", ok, why)
	}
}

func TestAPrefixFleetRunsOnlyInItsParentsPool(t *testing.T) {
	parent := previewParent()
	child := previewChild(parent)
	pool := DesiredPool(parent)
	if ok, why := InPool(pool, child); !ok {
		t.Fatalf("a preview fleet must run in its parent's pool: %s", why)
	}
	dedicated := held("celld-previews", "", "", "someone")
	otherParent := pool.DeepCopy()
	otherParent.Spec.FleetUID = "other-parent"
	owned := pool.DeepCopy()
	owned.OwnerReferences = []metav1.OwnerReference{{Kind: "ConfigMap", Name: "x", UID: "y", APIVersion: "v1"}}
	deleting := pool.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	endpoint := child.DeepCopy()
	endpoint.Spec.Storage.Endpoint = &v1.StorageEndpoint{URL: "http://store.example.invalid", CredentialsSecretName: "k"}
	notPreview := child.DeepCopy()
	notPreview.Spec.Storage.Prefix, notPreview.Spec.Storage.PreviewFleetRef = "", nil
	for _, c := range []struct {
		name    string
		pool    *v1.CelldStorageReservation
		child   *v1.CelldFleet
		mention string
	}{
		{"no pool at all", nil, child, "has no preview pool reservation"},
		{"a bucket a dedicated fleet holds", &dedicated, child, "reserved whole to fleet apps/f-someone"},
		{"the pool of another parent", otherParent, child, "preview pool of the previews of fleet apps/orders (UID other-parent)"},
		{"a pool with an owner", owned, child, "owner references"},
		{"a pool being deleted", deleting, child, "being deleted"},
		{"a child on another endpoint", pool, endpoint, "another endpoint"},
		{"a fleet without a prefix", pool, notPreview, "not a preview fleet"},
	} {
		ok, why := InPool(c.pool, c.child)
		if ok || !strings.Contains(why, c.mention) {
			t.Errorf("%s: want refused mentioning %q, got %v %q", c.name, c.mention, ok, why)
		}
	}
}

// TestAPreviewFleetGetsNoTuningRecord (seed 000): a preview fleet's reservation carries no
// reserved-tuning record, none is ever written, and a record put there by hand is not trusted:
// its tuning stays tied to the frozen hash.
func TestAPreviewFleetGetsNoTuningRecord(t *testing.T) {
	child := previewChild(previewParent())
	child.Spec.Execution = &v1.ExecutionSpec{CPURequest: new(resource.MustParse("25m"))}
	res := Desired(child)
	if _, ok := res.Annotations[v1.AnnotationReservedTuning]; ok {
		t.Fatal("a preview fleet's reservation must be created without a tuning record")
	}
	if NeedsTuningRecord(res, child) {
		t.Error("a preview fleet must never get a tuning record")
	}
	if ok, why := Matches(res, child); !ok {
		t.Fatalf("the preview fleet as created matches: %s", why)
	}
	rec, err := TuningRecord(child)
	if err != nil {
		t.Fatal(err)
	}
	retuned := child.DeepCopy()
	retuned.Spec.Execution.CPURequest = new(resource.MustParse("2"))
	forged := res.DeepCopy()
	forged.Annotations = map[string]string{v1.AnnotationReservedTuning: rec}
	if ok, _ := Matches(forged, retuned); ok {
		t.Error("a preview fleet whose tuning changed must not match, even with a record written by hand")
	}
	dedicated := fixture()
	if _, ok := Desired(dedicated).Annotations[v1.AnnotationReservedTuning]; !ok {
		t.Error("a dedicated fleet still gets its record")
	}
}
