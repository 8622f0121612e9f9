package localcluster

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// BenchResult is one throughput measurement of the cluster.
type BenchResult struct {
	Replicas  int
	ScaleUp   time.Duration // Deployment created -> every replica Ready
	ScaleDown time.Duration // replicas set to 0 -> no pod left
}

func (r BenchResult) String() string {
	return fmt.Sprintf("%d replicas: up %.1fs (%.0f pods/s), down %.1fs (%.0f pods/s)", r.Replicas,
		r.ScaleUp.Seconds(), float64(r.Replicas)/r.ScaleUp.Seconds(),
		r.ScaleDown.Seconds(), float64(r.Replicas)/r.ScaleDown.Seconds())
}

// BenchDeployment measures how fast the cluster creates and removes the pods of a plain
// Deployment (no fleet label: kwok alone makes them Ready). It bounds every scale test.
func BenchDeployment(ctx context.Context, cs kubernetes.Interface, replicas int) (BenchResult, error) {
	res := BenchResult{Replicas: replicas}
	ns := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return res, err
	}
	defer func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) }()
	labels := map[string]string{"app": "bench"}
	n := int32(replicas)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &n,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/bench:1"}}},
			},
		},
	}
	start := time.Now()
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return res, err
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := cs.AppsV1().Deployments(ns).Get(ctx, "bench", metav1.GetOptions{})
		return err == nil && got.Status.ReadyReplicas == n, nil
	})
	if err != nil {
		return res, fmt.Errorf("scale up to %d: %w", replicas, err)
	}
	res.ScaleUp = time.Since(start)
	start = time.Now()
	scale := []byte(`{"spec":{"replicas":0}}`)
	if _, err := cs.AppsV1().Deployments(ns).Patch(ctx, "bench", "application/merge-patch+json", scale, metav1.PatchOptions{}); err != nil {
		return res, err
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		return res, fmt.Errorf("scale down: %w", err)
	}
	res.ScaleDown = time.Since(start)
	return res, nil
}
