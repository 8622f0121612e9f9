package localcluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

const (
	// ManagedNodeLabel selects the nodes kwok plays the kubelet for. Removing it is how
	// fail-node simulates a dead kubelet: the lease stops, pods stay as they are.
	ManagedNodeLabel = "localcluster.celld.eric.dev/kwok"
	// ManagedNodeValue is the value of ManagedNodeLabel on a healthy node.
	ManagedNodeValue = "managed"

	zoneLabel   = corev1.LabelTopologyZone
	regionLabel = corev1.LabelTopologyRegion
)

// NodeName is the name of the i-th node (1-based) in zone.
func NodeName(zone string, i int) string { return fmt.Sprintf("kwok-%s-%d", zone, i) }

// nodeManifests builds the nodes: zone-major order, podCIDR 127.B.N.0/24 with B the cluster's
// loopback block and N counting from 1, so every pod gets a distinct loopback address a
// process can bind without any setup.
func nodeManifests(zones []string, region string, perZone, block int) []*corev1.Node {
	var nodes []*corev1.Node
	n := 0
	for _, z := range zones {
		for i := 1; i <= perZone; i++ {
			n++
			name := NodeName(z, i)
			cidr := fmt.Sprintf("127.%d.%d.0/24", block, n)
			nodes = append(nodes, &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{
					Name: name,
					Labels: map[string]string{
						ManagedNodeLabel: ManagedNodeValue, corev1.LabelHostname: name,
						corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
						zoneLabel: z, regionLabel: region, "type": "kwok",
					},
					Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", ResourceMetricsPathAnnotation: resourceMetricsPath(name)},
				},
				Spec: corev1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr}},
			})
		}
	}
	return nodes
}

func registerNodes(ctx context.Context, cs kubernetes.Interface, nodes []*corev1.Node) error {
	for _, n := range nodes {
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", n.Name, err)
		}
	}
	return nil
}

// waitNodesReady waits until every named node reports Ready=True.
func waitNodesReady(ctx context.Context, cs kubernetes.Interface, names []string, timeout time.Duration) error {
	var notReady []string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		notReady = notReady[:0]
		for _, name := range names {
			n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || !nodeReady(n) {
				notReady = append(notReady, name)
			}
		}
		return len(notReady) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("nodes not Ready (%s): %w", strings.Join(notReady, ", "), err)
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
