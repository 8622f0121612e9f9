package children

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// The kinds the fleet chart can render. Prune lists exactly these, so an object of another kind
// that happens to carry the fleet label is never deleted by this package.
var (
	gvkService             = schema.GroupVersionKind{Version: "v1", Kind: "Service"}
	gvkNetworkPolicy       = schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}
	gvkPDB                 = schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}
	gvkIngress             = schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}
	gvkHTTPRoute           = schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "HTTPRoute"}
	gvkAuthorizationPolicy = schema.GroupVersionKind{Group: "security.istio.io", Version: "v1", Kind: "AuthorizationPolicy"}
	gvkPeerAuthentication  = schema.GroupVersionKind{Group: "security.istio.io", Version: "v1", Kind: "PeerAuthentication"}

	// pruneKinds are listed by label and pruned after applying (PlanChildren); routes and the routing policy follow the
	// routing order instead (routingStep).
	pruneKinds = []schema.GroupVersionKind{gvkService, gvkNetworkPolicy, gvkPDB, gvkAuthorizationPolicy, gvkPeerAuthentication}
	routeKinds = []schema.GroupVersionKind{gvkHTTPRoute, gvkIngress}
)

// routingName is the name of the route and of its NetworkPolicy.
func routingName(f *v1.CelldFleet) string { return f.Name + "-routing" }

// getLive reads one object, nil when it does not exist or its API is not served (nothing of an
// unserved kind can exist).
func getLive(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
	switch {
	case err == nil:
		return u, nil
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return nil, nil
	}
	return nil, fmt.Errorf("read %s %s/%s: %w", gvk.Kind, ns, name, err)
}

// Create creates obj (POST) under FieldOwner with strict field validation, so a rendering
// with a field the API does not know fails instead of losing it; the API server arbitrates the
// name, so nothing is read before. When it was created, obj holds the API server's answer.
// When the name was taken, what is there is read through read into a new object of obj's
// type and returned as taken, for the caller to judge (Foreign): somebody else's, or the
// fleet's own that a cache has not delivered yet; taken is nil when it was deleted since.
func Create(ctx context.Context, c client.Client, read client.Reader, obj client.Object) (created bool, taken client.Object, err error) {
	err = c.Create(ctx, obj, client.FieldOwner(FieldOwner), client.FieldValidation(metav1.FieldValidationStrict))
	if err == nil || !apierrors.IsAlreadyExists(err) {
		return err == nil, nil, err
	}
	live := obj.DeepCopyObject().(client.Object)
	if err := read.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil, nil
		}
		return false, nil, fmt.Errorf("read %s/%s after its create found the name taken: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return false, live, nil
}

// Foreign says why fleet f may not touch obj, a live object at one of its names, naming the
// foreign owner when there is one; "" when f owns it (v1.CelldFleet.Owns). The fleet reconciler
// words its refusal of a workload with it too, so every foreign-object conflict reads alike.
func Foreign(obj client.Object, f *v1.CelldFleet) string {
	if f.Owns(obj) {
		return ""
	}
	if got := obj.GetLabels()[v1.LabelFleetUID]; got != string(f.UID) || f.UID == "" {
		return fmt.Sprintf("does not carry this fleet's %s label", v1.LabelFleetUID)
	}
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller && ref.UID != f.UID {
			return fmt.Sprintf("is controlled by %s %s", ref.Kind, ref.Name)
		}
	}
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID != f.UID {
			return fmt.Sprintf("has an owner reference to %s %s (UID %s), so the garbage collector would delete it when that owner goes", ref.Kind, ref.Name, ref.UID)
		}
	}
	return "is not this fleet's"
}

func describe(u client.Object, kind string) string {
	return fmt.Sprintf("%s %s/%s", kind, u.GetNamespace(), u.GetName())
}
