package nscache

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// TestOneFleetFindsTheUIDASelectorRequires: a List selecting one fleet's UID label is served
// from the fleet UID index; any other selection is left to the label selector alone.
func TestOneFleetFindsTheUIDASelectorRequires(t *testing.T) {
	for _, c := range []struct {
		sel  string
		uid  string
		uses bool
	}{
		{v1.LabelFleetUID + "=u1", "u1", true},
		{v1.LabelFleetUID + "==u1,app=x", "u1", true},
		{v1.LabelFleetUID + " in (u1)", "u1", true},
		{v1.LabelFleetUID + " in (u1,u2)", "", false},
		{v1.LabelFleetUID + "!=u1", "", false},
		{v1.LabelFleetUID, "", false},
		{"app=x", "", false},
		{"", "", false},
	} {
		sel, err := labels.Parse(c.sel)
		if err != nil {
			t.Fatal(err)
		}
		uid, ok := oneFleet(sel)
		if uid != c.uid || ok != c.uses {
			t.Errorf("oneFleet(%q) = %q, %v; want %q, %v", c.sel, uid, ok, c.uid, c.uses)
		}
	}
}
