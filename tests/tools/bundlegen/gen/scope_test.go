package gen

import (
	"reflect"
	"strings"
	"testing"
)

func rule(groups, resources []any, verbs ...any) map[string]any {
	return map[string]any{"apiGroups": groups, "resources": resources, "verbs": verbs}
}

func TestSplitByScopeKeepsOnlyClusterScopedRulesClusterWide(t *testing.T) {
	known := map[string]bool{
		"celld.eric.dev/celldfleets":              true,
		"celld.eric.dev/celldstoragereservations": false,
		"/events":                       true,
		"storage.k8s.io/storageclasses": false,
	}
	for _, row := range []struct {
		name                string
		rules               []any
		wantCluster, wantNS []any
		wantErr             string
	}{
		{
			name:        "a namespaced resource and its subresource go to permissions, a cluster-scoped one stays cluster-wide",
			rules:       []any{rule([]any{"celld.eric.dev"}, []any{"celldfleets/status"}, "patch"), rule([]any{"storage.k8s.io"}, []any{"storageclasses"}, "list")},
			wantCluster: []any{rule([]any{"storage.k8s.io"}, []any{"storageclasses"}, "list")},
			wantNS:      []any{rule([]any{"celld.eric.dev"}, []any{"celldfleets/status"}, "patch")},
		},
		{
			name:        "a rule naming both scopes is split with the same verbs",
			rules:       []any{rule([]any{"celld.eric.dev"}, []any{"celldfleets", "celldstoragereservations"}, "get")},
			wantCluster: []any{rule([]any{"celld.eric.dev"}, []any{"celldstoragereservations"}, "get")},
			wantNS:      []any{rule([]any{"celld.eric.dev"}, []any{"celldfleets"}, "get")},
		},
		{
			name:    "a resource of unknown scope is refused, not guessed",
			rules:   []any{rule([]any{""}, []any{"nodes"}, "get")},
			wantErr: "does not know",
		},
		{
			name:    "a wildcard is refused",
			rules:   []any{rule([]any{"*"}, []any{"events"}, "create")},
			wantErr: "does not know",
		},
		{
			name:    "resourceNames are refused",
			rules:   []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"events"}, "resourceNames": []any{"x"}, "verbs": []any{"get"}}},
			wantErr: "resourceNames",
		},
	} {
		t.Run(row.name, func(t *testing.T) {
			cluster, ns, err := splitByScope(row.rules, known)
			if row.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), row.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, row.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cluster, row.wantCluster) {
				t.Errorf("clusterPermissions rules = %v, want %v", cluster, row.wantCluster)
			}
			if !reflect.DeepEqual(ns, row.wantNS) {
				t.Errorf("permissions rules = %v, want %v", ns, row.wantNS)
			}
		})
	}
}

// TestTheBundleGrantsPodsAndClaimsOnlyInTargetNamespaces renders the bundle from config/ and
// checks that clusterPermissions, which OLM binds cluster-wide in every install mode, name no
// resource of a fleet namespace.
func TestTheBundleGrantsPodsAndClaimsOnlyInTargetNamespaces(t *testing.T) {
	in, err := collect("../../../../config")
	if err != nil {
		t.Fatal(err)
	}
	cluster, namespaced, err := installRules(in)
	if err != nil {
		t.Fatal(err)
	}
	known, err := scopes(in.crds)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range cluster {
		groups := r.(map[string]any)["apiGroups"].([]any)
		for _, res := range r.(map[string]any)["resources"].([]any) {
			base, _, _ := strings.Cut(res.(string), "/")
			if known[groups[0].(string)+"/"+base] {
				t.Errorf("clusterPermissions grant %v on %s, a namespaced resource: every OwnNamespace, SingleNamespace and MultiNamespace install would get it cluster-wide", r.(map[string]any)["verbs"], res)
			}
		}
	}
	for _, want := range append(rules(in.fleetRoles), rules(in.roles)...) {
		found := false
		for _, got := range namespaced {
			found = found || reflect.DeepEqual(got, want)
		}
		if !found {
			t.Errorf("permissions lack the fleet-namespace or leader-election rule %v", want)
		}
	}
}
