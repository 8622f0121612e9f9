// Package ssa converts the status the operator writes into the typed apply configurations
// server-side apply takes: the generated ones of the CelldFleet API
// (api/v1alpha1/applyconfiguration). They share the JSON field names of the types they
// configure, so the conversion is the object's JSON: exactly the fields set on the object
// (those not omitted as empty) become the apply's fields, which is what the operator's field
// manager then owns. A field the configuration has no place for is an error, never silently
// left out of the apply. (Workloads and children are created by a plain create with strict
// field validation, and updated, not applied: docs/architecture.md, Writes.)
package ssa

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Into fills the apply configuration cfg from the typed value obj.
func Into[T any](obj any, cfg *T) (*T, error) {
	if err := fill(obj, cfg); err != nil {
		return nil, err
	}
	return cfg, nil
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
