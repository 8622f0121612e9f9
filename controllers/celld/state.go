package celld

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// Limits on the fields the operator copies into status. They bound what a node can make us
// publish (reference-operator.md §2, application view).
const (
	maxVersionLen           = 256
	maxPrefixLen            = 1024
	maxRuntimeGenerationLen = 128
	maxSwapping             = 1_000_000_000
)

var (
	// ErrUnsupported means the node answered but does not offer what the operator reads: a 501, or
	// a /state document without a deployment object (a runtime without a deployed application, or
	// an older celld). It is not a malformed answer.
	ErrUnsupported = errors.New("celld does not report a deployment")
	// ErrInvalidDeployment means the deployment object is present but breaks its schema.
	ErrInvalidDeployment = fmt.Errorf("%w: invalid deployment", ErrMalformed)
	// ErrIdentity means shutdown.runtime_generation is present but unusable.
	ErrIdentity = fmt.Errorf("%w: invalid runtime identity", ErrMalformed)
	// ErrInvalidLoad means the load fields are missing or break their schema. It only ever
	// appears in State.LoadErr or from DecodeLoad, never fails DecodeState.
	ErrInvalidLoad = errors.New("invalid celld load view")
)

// State is the part of one /state document the operator uses.
type State struct {
	Deployment Deployment
	// RuntimeGeneration is shutdown.runtime_generation, new for every celld process; empty when
	// the node does not report it.
	RuntimeGeneration string
	// Load is the capacity view, nil when the document does not carry a complete one; LoadErr
	// then says why. The application observer ignores both.
	Load    *Load
	LoadErr error
}

// Deployment is the application a node has loaded and how far its resident cells are on it.
type Deployment struct {
	Version    string // deployment.version
	Prefix     string // deployment.prefix, e.g. deploy/<script>/<version>
	Generation uint64 // deployment.generation, process-local, starts at 1
	// SwappingCells is deployment.swapping: cells moving to the current generation right now.
	SwappingCells int64
	// ResidentCells is the number of entries of deployment.cells.
	ResidentCells int
	// PendingCells is the number of resident cells still on an older generation.
	PendingCells int
}

// Load is the capacity view of /state, for a capacity collector. Freshness of SampledMS and
// plausibility bounds are the collector's decision, not the decoder's.
type Load struct {
	CapacityWaiting   uint64 // capacity_waiting: >0 means the node wants another node
	ActivationWaiting uint64 // activation_waiting
	Restoring         uint64 // restoring
	Occupied          uint64 // occupied
	OwnedCells        uint64 // owned_cells
	Draining          bool   // node_load.draining
	RebalancePaused   bool   // node_load.rebalance_paused
	Pressured         bool   // node_load.pressured
	MemoryHeadroom    bool   // node_load.memory_headroom
	SampledMS         int64  // node_load.sampled_ms, Unix milliseconds
	ResidentCells     uint64 // node_load.resident_cells
	RSSBytes          uint64 // node_load.rss_bytes
	InUseBytes        uint64 // node_load.in_use_bytes
}

// DecodeState validates b with ValidObject and decodes the deployment, the runtime generation and,
// when present, the load view. Unknown keys are ignored; a null value counts as missing. A missing
// deployment is ErrUnsupported; anything else wrong wraps ErrMalformed.
func DecodeState(b []byte) (State, error) {
	if err := ValidObject(b); err != nil {
		return State{}, err
	}
	var st State
	top := topLevel(b)
	// a present but broken field is Malformed even when the deployment is absent: the document
	// as a whole is not one to trust
	var schema []byte
	var err error
	if top.shutdown != nil {
		if st.RuntimeGeneration, schema, err = decodeShutdown(top.shutdown); err != nil {
			return State{}, err
		}
	}
	if top.deployment == nil {
		return State{}, fmt.Errorf("%w: no deployment object in /state", ErrUnsupported)
	}
	if st.Deployment, err = decodeDeployment(top.deployment); err != nil {
		return State{}, err
	}
	load, err := decodeLoad(top, schema, st.RuntimeGeneration)
	if err != nil {
		st.LoadErr = err
	} else {
		st.Load = &load
	}
	return st, nil
}

// DecodeLoad validates b and decodes only the load view. It requires shutdown.schema_version 1
// and a non-empty runtime generation, as the reference collector does.
func DecodeLoad(b []byte) (Load, error) {
	if err := ValidObject(b); err != nil {
		return Load{}, err
	}
	top := topLevel(b)
	var gen string
	var schema []byte
	if top.shutdown != nil {
		var err error
		if gen, schema, err = decodeShutdown(top.shutdown); err != nil {
			return Load{}, err
		}
	}
	return decodeLoad(top, schema, gen)
}

// document holds the raw values of the top-level members the decoders read; nil means absent or
// null.
type document struct {
	deployment, shutdown, nodeLoad                                 []byte
	capacityWaiting, activationWaiting, restoring, occupied, owned []byte
}

func topLevel(b []byte) document {
	var d document
	eachMember(b[skipSpace(b, 0):], func(key, v []byte) {
		switch string(key) {
		case "deployment":
			d.deployment = v
		case "shutdown":
			d.shutdown = v
		case "node_load":
			d.nodeLoad = v
		case "capacity_waiting":
			d.capacityWaiting = v
		case "activation_waiting":
			d.activationWaiting = v
		case "restoring":
			d.restoring = v
		case "occupied":
			d.occupied = v
		case "owned_cells":
			d.owned = v
		}
	})
	return d
}

func decodeDeployment(v []byte) (Deployment, error) {
	if v[0] != '{' {
		return Deployment{}, fmt.Errorf("%w: deployment is a %s, not an object", ErrInvalidDeployment, kind(v))
	}
	var raw struct{ version, prefix, generation, swapping, cells []byte }
	eachMember(v, func(key, v []byte) {
		switch string(key) {
		case "version":
			raw.version = v
		case "prefix":
			raw.prefix = v
		case "generation":
			raw.generation = v
		case "swapping":
			raw.swapping = v
		case "cells":
			raw.cells = v
		}
	})
	var d Deployment
	var err error
	if d.Version, err = boundedString("deployment.version", raw.version, 1, maxVersionLen); err != nil {
		return Deployment{}, fmt.Errorf("%w: %w", ErrInvalidDeployment, err)
	}
	if d.Prefix, err = boundedString("deployment.prefix", raw.prefix, 1, maxPrefixLen); err != nil {
		return Deployment{}, fmt.Errorf("%w: %w", ErrInvalidDeployment, err)
	}
	if d.Generation, err = uintField("deployment.generation", raw.generation); err != nil {
		return Deployment{}, fmt.Errorf("%w: %w", ErrInvalidDeployment, err)
	}
	if d.Generation == 0 {
		return Deployment{}, fmt.Errorf("%w: deployment.generation is 0; generations start at 1", ErrInvalidDeployment)
	}
	swapping, err := uintField("deployment.swapping", raw.swapping)
	if err != nil || swapping > maxSwapping {
		return Deployment{}, fmt.Errorf("%w: deployment.swapping must be an integer from 0 to %d", ErrInvalidDeployment, maxSwapping)
	}
	d.SwappingCells = int64(swapping)
	if raw.cells == nil || raw.cells[0] != '{' {
		return Deployment{}, fmt.Errorf("%w: deployment.cells must be an object", ErrInvalidDeployment)
	}
	eachMember(raw.cells, func(key, v []byte) {
		if err != nil {
			return
		}
		var g uint64
		if g, err = uintField("deployment.cells value", v); err != nil {
			return
		}
		// a cell cannot run a generation the process has not built yet
		if g > d.Generation {
			err = fmt.Errorf("cell %s is on generation %d, beyond the current %d", clip(key), g, d.Generation)
			return
		}
		d.ResidentCells++
		if g != d.Generation {
			d.PendingCells++
		}
	})
	if err != nil {
		return Deployment{}, fmt.Errorf("%w: %w", ErrInvalidDeployment, err)
	}
	return d, nil
}

// decodeShutdown returns shutdown.runtime_generation and the raw shutdown.schema_version.
func decodeShutdown(v []byte) (gen string, schema []byte, err error) {
	if v[0] != '{' {
		return "", nil, fmt.Errorf("%w: shutdown is a %s, not an object", ErrIdentity, kind(v))
	}
	var rawGen []byte
	eachMember(v, func(key, v []byte) {
		switch string(key) {
		case "runtime_generation":
			rawGen = v
		case "schema_version":
			schema = v
		}
	})
	if rawGen == nil {
		return "", schema, nil
	}
	gen, err = boundedString("shutdown.runtime_generation", rawGen, 0, maxRuntimeGenerationLen)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrIdentity, err)
	}
	return gen, schema, nil
}

func decodeLoad(d document, schema []byte, gen string) (Load, error) {
	if s, err := uintField("shutdown.schema_version", schema); err != nil || s != 1 {
		return Load{}, fmt.Errorf("%w: the load view needs shutdown.schema_version 1", ErrInvalidLoad)
	}
	if gen == "" {
		return Load{}, fmt.Errorf("%w: the load view needs a runtime generation", ErrInvalidLoad)
	}
	var l Load
	errs := []error{
		into(&l.CapacityWaiting, "capacity_waiting", d.capacityWaiting),
		into(&l.ActivationWaiting, "activation_waiting", d.activationWaiting),
		into(&l.Restoring, "restoring", d.restoring),
		into(&l.Occupied, "occupied", d.occupied),
		into(&l.OwnedCells, "owned_cells", d.owned),
	}
	if d.nodeLoad == nil || d.nodeLoad[0] != '{' {
		errs = append(errs, errors.New("node_load must be an object"))
	} else {
		var sampled uint64
		seen := 0
		eachMember(d.nodeLoad, func(key, v []byte) {
			var err error
			switch string(key) {
			case "draining":
				err = boolInto(&l.Draining, "node_load.draining", v)
			case "rebalance_paused":
				err = boolInto(&l.RebalancePaused, "node_load.rebalance_paused", v)
			case "pressured":
				err = boolInto(&l.Pressured, "node_load.pressured", v)
			case "memory_headroom":
				err = boolInto(&l.MemoryHeadroom, "node_load.memory_headroom", v)
			case "sampled_ms":
				err = into(&sampled, "node_load.sampled_ms", v)
			case "resident_cells":
				err = into(&l.ResidentCells, "node_load.resident_cells", v)
			case "rss_bytes":
				err = into(&l.RSSBytes, "node_load.rss_bytes", v)
			case "in_use_bytes":
				err = into(&l.InUseBytes, "node_load.in_use_bytes", v)
			default:
				return
			}
			seen++
			errs = append(errs, err)
		})
		if seen != 8 {
			errs = append(errs, errors.New("node_load lacks required fields"))
		}
		if sampled > math.MaxInt64 {
			errs = append(errs, errors.New("node_load.sampled_ms is out of range"))
		}
		l.SampledMS = int64(sampled)
	}
	if err := errors.Join(errs...); err != nil {
		return Load{}, fmt.Errorf("%w: %w", ErrInvalidLoad, err)
	}
	return l, nil
}

func into(dst *uint64, name string, v []byte) (err error) {
	*dst, err = uintField(name, v)
	return err
}

func boolInto(dst *bool, name string, v []byte) error {
	switch {
	case v == nil:
		return fmt.Errorf("%s is missing", name)
	case v[0] == 't':
		*dst = true
	case v[0] == 'f':
		*dst = false
	default:
		return fmt.Errorf("%s is a %s, not a boolean", name, kind(v))
	}
	return nil
}

// uintField parses a non-negative JSON integer. Fractions, exponents and signs are refused:
// celld writes u64 counters as plain integers, so anything else is a different document.
func uintField(name string, v []byte) (uint64, error) {
	if v == nil {
		return 0, fmt.Errorf("%s is missing", name)
	}
	n, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s must be an unsigned 64-bit integer, got %s", name, clip(v))
	}
	return n, nil
}

// boundedString decodes a JSON string of min to max characters.
func boundedString(name string, v []byte, min, max int) (string, error) {
	if v == nil {
		return "", fmt.Errorf("%s is missing", name)
	}
	if v[0] != '"' {
		return "", fmt.Errorf("%s is a %s, not a string", name, kind(v))
	}
	raw := v[1 : len(v)-1]
	// cheap bound first: a character takes at least one byte and an escape at most six
	if len(raw) > 6*max {
		return "", fmt.Errorf("%s is longer than %d characters", name, max)
	}
	var s string
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		s = string(raw)
	} else {
		s = string(appendUnquoted(nil, raw))
	}
	if n := utf8.RuneCountInString(s); n < min || n > max {
		return "", fmt.Errorf("%s has %d characters, want %d to %d", name, n, min, max)
	}
	return s, nil
}

func kind(v []byte) string {
	switch v[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	default:
		return "number"
	}
}

// clip shortens raw bytes for an error message.
func clip(b []byte) string {
	if len(b) > 80 {
		return strconv.Quote(string(b[:80])) + "..."
	}
	return strconv.Quote(string(b))
}
