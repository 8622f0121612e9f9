// Package e2e holds the Ginkgo suites that run against the local cluster: one cluster per
// `go test` or `ginkgo -p` run, a namespace per spec.
package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "celld-operator e2e")
}

// Process 1 starts the cluster (building the binaries first if bin/ lacks them) and hands
// the kubeconfig to every parallel process; each process then builds its own clients.
var _ = SynchronizedBeforeSuite(func(ctx context.Context) []byte {
	data, err := framework.StartCluster(ctx)
	Expect(err).NotTo(HaveOccurred(), "start the local cluster")
	return data
}, func(ctx context.Context, data []byte) {
	Expect(framework.Connect(data)).To(Succeed())
	// The operator installs its CRDs as it starts, in the background: wait until the API server
	// serves CelldFleets before any spec builds a client, whose REST mapper would otherwise
	// remember the kind as missing.
	framework.EventuallyWithin(ctx, framework.Medium, func() []string {
		list, _ := framework.Cluster.Client.Discovery().ServerResourcesForGroupVersion(v1.GroupVersion.String())
		var names []string
		if list != nil {
			for _, r := range list.APIResources {
				names = append(names, r.Name)
			}
		}
		return names
	}).Should(ContainElements("celldfleets", "celldstoragereservations"), "the API server never served the operator's CRDs")
})

var _ = SynchronizedAfterSuite(func() {}, func() {
	framework.StopCluster()
})
