package localcluster

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// stageFiles are the kwok Stages of this cluster, adapted from kwok's "fast" set: fleet pods
// get their own start and delete stages so the celld simulator owns readiness and drain.
//
//go:embed stages/*.yaml
var stageFiles embed.FS

var (
	crdGVR   = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	stageGVR = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "stages"}
)

// installStages installs the Stage CRD, waits until it is served, then creates every Stage.
// It runs before kwok starts: kwok neither installs the CRD nor tolerates zero stages.
func installStages(ctx context.Context, dyn dynamic.Interface) error {
	crd, err := decodeEmbedded("stages/stage-crd.yaml")
	if err != nil {
		return err
	}
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Stage CRD: %w", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(stageGVR).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("kwok's Stage CRD is not served: %w", err)
	}
	files, err := fs.Glob(stageFiles, "stages/*.yaml")
	if err != nil {
		return err
	}
	for _, f := range files {
		if f == "stages/stage-crd.yaml" {
			continue
		}
		obj, err := decodeEmbedded(f)
		if err != nil {
			return err
		}
		if _, err := dyn.Resource(stageGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create Stage %s: %w", obj.GetName(), err)
		}
	}
	return nil
}

func decodeEmbedded(name string) (*unstructured.Unstructured, error) {
	b, err := stageFiles.ReadFile(name)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &obj.Object); err != nil {
		return nil, fmt.Errorf("decode %s: %w", name, err)
	}
	return obj, nil
}
