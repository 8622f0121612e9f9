package reservation

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Name is the reservation name of a bucket, or of a prefix in a bucket: "s3-" and the first 56
// hex digits of sha256(bucket), or "s3-scope-" and the first 54 of sha256(bucket NUL prefix).
// Both are at most 63 characters, a valid object name whatever the bucket, and the NUL keeps
// bucket "a" with prefix "bc" apart from bucket "ab" with prefix "c".
func Name(bucket, prefix string) string {
	if prefix == "" {
		sum := sha256.Sum256([]byte(bucket))
		return "s3-" + hex.EncodeToString(sum[:])[:56]
	}
	sum := sha256.Sum256([]byte(bucket + "\x00" + prefix))
	return "s3-scope-" + hex.EncodeToString(sum[:])[:54]
}

// Desired is the reservation a fleet creates: its name and immutable spec, with no owner
// reference (it must outlive the fleet) and, when it fits, the reserved-tuning record of the
// fleet as created, so tuning may change from the first reconcile on. A preview fleet gets no
// record (seed 000): its tuning is generated, restored by the preview reconciler, and stays
// tied to the reservation's hash.
func Desired(f *v1.CelldFleet) *v1.CelldStorageReservation {
	st := &f.Spec.Storage
	initial := f.DesiredReplicas()
	r := &v1.CelldStorageReservation{
		ObjectMeta: metav1.ObjectMeta{Name: Name(st.Bucket, st.Prefix)},
		Spec: v1.CelldStorageReservationSpec{
			Bucket:          st.Bucket,
			Prefix:          st.Prefix,
			Endpoint:        endpoint(f),
			InitialReplicas: initial,
			FleetNamespace:  f.Namespace,
			FleetName:       f.Name,
			FleetUID:        string(f.UID),
			SpecHash:        SpecHash(f, initial),
			Seed:            st.Seed.DeepCopy(),
		},
	}
	if rec, err := TuningRecord(f); err == nil && !previewFleet(f) {
		r.Annotations = map[string]string{v1.AnnotationReservedTuning: rec}
	}
	return r
}

func endpoint(f *v1.CelldFleet) string {
	if e := f.Spec.Storage.Endpoint; e != nil {
		return e.URL
	}
	return ""
}

// SpecHash is the hex sha256 of the JSON of the fleet's storage-relevant spec, after
// defaulting, with initialReplicas in place of replicas. It is frozen in the reservation at
// creation. What is left out is what may change without touching what the bucket holds:
//
//   - replicas: scaling is routine; the creation count (initialReplicas) stands in for it;
//   - runtimeImage: upgrades roll the fleet on the same bucket and disks;
//   - maintenance: pausing and restart tokens;
//   - capacity: the policy changes freely;
//   - routing and mesh: how clients and peers reach the members, not what they store;
//   - export: change export writes to its own sink and may be turned on, off or changed;
//   - previews: added once, and reserved separately (the preview bucket has its own
//     reservation).
//
// bucketWorkload Deployment is hashed as the absent field, so defaulting it changes nothing.
// Everything else (profile, bucketWorkload Ordered, serviceAccountName, storage, placement and
// the tuning: execution, lifecycle, env, telemetry) is in the hash; the tuning may change
// anyway through the reserved-tuning record (see Matches). Reservations written by earlier
// releases froze other layouts of the same spec; they verify too (see frozenLayout).
func SpecHash(f *v1.CelldFleet, initialReplicas int32) string {
	return digest(specJSON(excluded(defaulted(&f.Spec), initialReplicas)))
}

// defaulted is a defaulted deep copy of s.
func defaulted(s *v1.CelldFleetSpec) v1.CelldFleetSpec {
	c := v1.CelldFleet{Spec: *s.DeepCopy()}
	c.Default()
	return c.Spec
}

// excluded is d with the exclusions applied; d is a copy the caller owns.
func excluded(d v1.CelldFleetSpec, initialReplicas int32) v1.CelldFleetSpec {
	d.Replicas = &initialReplicas
	d.RuntimeImage = ""
	d.Maintenance, d.Capacity, d.Routing, d.Mesh, d.Export, d.Previews = nil, nil, nil, nil, nil, nil
	if d.BucketWorkload == v1.BucketWorkloadDeployment {
		d.BucketWorkload = ""
	}
	return d
}

// specJSON is the hashed JSON of a spec, or nil if it cannot be encoded.
func specJSON(s v1.CelldFleetSpec) []byte {
	b, err := json.Marshal(s)
	if err != nil {
		// The spec is plain data; a marshal failure is a programming error. No bytes hash to
		// no hash, which matches no reservation, so it fails closed.
		return nil
	}
	return b
}

// digest is the hex sha256 of b, or "" for no bytes.
func digest(b []byte) string {
	if b == nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// previewFleet: f runs in a prefix of a preview pool (storage.previewFleetRef).
func previewFleet(f *v1.CelldFleet) bool {
	return f.Spec.Storage.PreviewFleetRef != nil
}
