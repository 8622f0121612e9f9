package v1alpha1

import (
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Member naming, the one rule every package uses: a fleet's members are the Pods FLEET-N and
// their disks the claims data-FLEET-N (the StatefulSet's naming), with 0 <= N < MaxMembers.
const (
	// MaxMembers bounds member ordinals: the CRD's maximum of spec.replicas.
	MaxMembers = 100
	// ClaimTemplateName names the PersistentFleet claim template; claims are
	// ClaimTemplateName-FLEET-N.
	ClaimTemplateName = "data"
)

// MemberName is the Pod name of ordinal n: "FLEET-N".
func MemberName(fleet string, n int32) string {
	return fleet + "-" + strconv.FormatInt(int64(n), 10)
}

// ClaimName is the claim of ordinal n: "data-FLEET-N".
func ClaimName(fleet string, n int32) string {
	return ClaimTemplateName + "-" + MemberName(fleet, n)
}

// MemberOrdinal parses a member Pod name of fleet into its ordinal. It refuses another fleet's
// names that share the prefix ("f-x-1" is not a member of "f"), signs, leading zeros and
// ordinals of MaxMembers or more, so a name it accepts is exactly MemberName(fleet, n).
func MemberOrdinal(fleet, pod string) (int32, bool) {
	digits, ok := strings.CutPrefix(pod, fleet+"-")
	if !ok || digits == "" || len(digits) > 2 || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	var n int32
	for _, c := range []byte(digits) {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int32(c-'0')
	}
	return n, n < MaxMembers
}

// ClaimOrdinal parses a member claim name of fleet ("data-FLEET-N") into its ordinal.
func ClaimOrdinal(fleet, claim string) (int32, bool) {
	pod, ok := strings.CutPrefix(claim, ClaimTemplateName+"-")
	if !ok {
		return 0, false
	}
	return MemberOrdinal(fleet, pod)
}

// ClaimFleet is the fleet name a member claim name ("data-FLEET-N") belongs to, "" when the
// name is not a member claim's. It is the inverse of ClaimName: ClaimOrdinal(ClaimFleet(c), c)
// holds for every member claim c.
func ClaimFleet(claim string) string {
	pod, ok := strings.CutPrefix(claim, ClaimTemplateName+"-")
	if !ok {
		return ""
	}
	i := strings.LastIndexByte(pod, '-')
	if i <= 0 {
		return ""
	}
	if _, ok := MemberOrdinal(pod[:i], pod); !ok {
		return ""
	}
	return pod[:i]
}

// RunsAsStatefulSet reports which workload kind runs the fleet: a StatefulSet for
// PersistentFleet and the Ordered Bucket layout, a Deployment for the Relaxed Bucket layout.
func (f *CelldFleet) RunsAsStatefulSet() bool {
	return f.Spec.Profile == ProfilePersistentFleet || f.Spec.BucketWorkload == BucketWorkloadOrdered
}

// Owns reports whether the fleet owns obj, the one ownership rule of every object the operator
// creates: it carries the fleet's UID label, and no owner reference other than one to the fleet
// itself (an earlier release set the fleet as controller of children). The operator renders no
// owner reference, so a reference to anything else, controller or not, was put there by someone
// else, and the garbage collector would delete the object when that owner goes: the seed's
// "objects with owner references are refused". An object that fails it is never adopted,
// changed or deleted.
func (f *CelldFleet) Owns(obj interface {
	GetLabels() map[string]string
	GetOwnerReferences() []metav1.OwnerReference
}) bool {
	if obj.GetLabels()[LabelFleetUID] != string(f.UID) || f.UID == "" {
		return false
	}
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID != f.UID {
			return false
		}
	}
	return true
}
