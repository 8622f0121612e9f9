// Package ssa converts the operator's typed objects into the typed apply configurations
// server-side apply takes: the generated ones of the CelldFleet API
// (api/v1alpha1/applyconfiguration) and client-go's for built-in kinds. Both share the JSON
// field names of the types they configure, so the conversion is the object's JSON: exactly the
// fields set on the object (those not omitted as empty) become the apply's fields, which is
// what the operator's field manager then owns.
package ssa

import (
	"encoding/json"
	"fmt"
)

// Into fills the apply configuration cfg from the typed value obj.
func Into[T any](obj any, cfg *T) (*T, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %T for server-side apply: %w", obj, err)
	}
	if err := json.Unmarshal(raw, cfg); err != nil {
		return nil, fmt.Errorf("decode %T into %T: %w", obj, cfg, err)
	}
	return cfg, nil
}
