// Package ssa converts what the operator writes into the typed apply configurations
// server-side apply takes: the generated ones of the CelldFleet API
// (api/v1alpha1/applyconfiguration), client-go's for built-in kinds and the Gateway API's for
// its routes. All share the JSON field names of the types they configure, so the conversion is
// the object's JSON: exactly the fields set on the object (those not omitted as empty) become
// the apply's fields, which is what the operator's field manager then owns. A field the
// configuration has no place for is an error, never silently left out of the apply.
package ssa

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/applyconfigurations"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayapply "sigs.k8s.io/gateway-api/applyconfiguration"
	gatewayscheme "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/scheme"
)

// AddToScheme registers the Gateway API's types, whose apply configurations ForKind returns,
// in the scheme of a client that applies them: a client sends a typed apply only for a group
// version its scheme knows. client-go's scheme already holds the built-in kinds.
var AddToScheme = gatewayscheme.AddToScheme

// Into fills the apply configuration cfg from the typed value obj.
func Into[T any](obj any, cfg *T) (*T, error) {
	if err := fill(obj, cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// FromUnstructured is the apply configuration of a rendered object: the typed one of its kind
// (ForKind) filled from it, or, for a kind without one, the object itself.
func FromUnstructured(u *unstructured.Unstructured) (runtime.ApplyConfiguration, error) {
	cfg := ForKind(u.GroupVersionKind())
	if cfg == nil {
		// Apply writes the server's answer into its argument; the caller keeps its rendering.
		return client.ApplyConfigurationFromUnstructured(u.DeepCopy()), nil
	}
	if err := fill(u, cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// ForKind returns an empty typed apply configuration of a top-level kind: client-go's for
// built-in kinds and the Gateway API's for its kinds; nil for any other kind.
//
// Istio's kinds are left out on purpose, so their rendering is applied as it is. The apply
// configurations of istio.io/client-go (v1.32) do not implement runtime.ApplyConfiguration, so
// client.Apply does not take them; and they hold the spec as an istio.io/api protobuf message
// encoded by golang/protobuf's jsonpb, which omits enum zero values and ignores unknown fields:
// an AuthorizationPolicy's `action: ALLOW` would not be sent, the field manager would not own
// it, and the next drift check would find the live policy differing from its rendering.
func ForKind(gvk schema.GroupVersionKind) runtime.ApplyConfiguration {
	for _, forKind := range []func(schema.GroupVersionKind) any{applyconfigurations.ForKind, gatewayapply.ForKind} {
		if cfg, ok := forKind(gvk).(runtime.ApplyConfiguration); ok {
			return cfg
		}
	}
	return nil
}

// Answer is the object the API server returned for an Apply of cfg, in the form a client reads
// unstructured objects in (the API server's JSON), so it compares with objects read later.
// Apply decodes the answer into cfg over the request; the server keeps every field an apply
// sets, so the answer holds all of them and the result is the answer.
func Answer(cfg runtime.ApplyConfiguration) (*unstructured.Unstructured, error) {
	raw, err := json.Marshal(cfg) // the unstructured configuration encodes as its object
	if err != nil {
		return nil, fmt.Errorf("encode the answer to an apply of %T: %w", cfg, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("decode the answer to an apply of %T: %w", cfg, err)
	}
	return u, nil
}

func fill(obj, cfg any) error {
	raw, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encode %T for server-side apply: %w", obj, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil {
		return fmt.Errorf("decode %T into %T: %w", obj, cfg, err)
	}
	return nil
}
