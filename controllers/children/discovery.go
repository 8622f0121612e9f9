package children

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
)

// APIs reports which optional APIs the cluster serves: the Gateway API's HTTPRoute and Istio's
// security.istio.io/v1 AuthorizationPolicy and PeerAuthentication. The answers become
// OperatorFacts.GatewayAPIInstalled and IstioInstalled. Ask again on a reconcile period rather
// than once at start: CRDs are installed and removed while the operator runs.
func APIs(d discovery.DiscoveryInterface) (gatewayAPI, istio bool, err error) {
	gatewayAPI, err = serves(d, gvkHTTPRoute.GroupVersion().String(), "httproutes")
	if err != nil {
		return false, false, err
	}
	istio, err = serves(d, gvkAuthorizationPolicy.GroupVersion().String(), "authorizationpolicies", "peerauthentications")
	if err != nil {
		return false, false, err
	}
	return gatewayAPI, istio, nil
}

func serves(d discovery.DiscoveryInterface, groupVersion string, resources ...string) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(groupVersion)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", groupVersion, err)
	}
	for _, want := range resources {
		found := false
		for _, r := range list.APIResources {
			if r.Name == want {
				found = true
				break
			}
		}
		if !found {
			return false, nil
		}
	}
	return true, nil
}
