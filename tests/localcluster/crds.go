package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// OperatorCRDs are the CRD files a test cluster needs, relative to the repository root: the
// operator's own, and the optional Gateway API HTTPRoute and Istio security CRDs that the
// fleet chart renders for.
var OperatorCRDs = []string{"config/crd/bases/*.yaml", "controllers/children/testdata/crds/*.yaml"}

// InstallCRDs creates every CRD in the files matching the globs (relative to root; files may
// hold several documents) and waits until each is Established. CRDs that exist are kept.
func InstallCRDs(ctx context.Context, cfg *rest.Config, root string, globs ...string) error {
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var names []string
	for _, g := range globs {
		files, err := filepath.Glob(filepath.Join(root, g))
		if err != nil || len(files) == 0 {
			return fmt.Errorf("no CRD files match %s under %s", g, root)
		}
		for _, file := range files {
			n, err := createCRDs(ctx, cs, file)
			if err != nil {
				return err
			}
			names = append(names, n...)
		}
	}
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			crd, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			return err == nil && established(crd), nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", name, err)
		}
	}
	return nil
}

func createCRDs(ctx context.Context, cs apiextensionsclient.Interface, file string) ([]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, doc := range strings.Split(string(data), "\n---") {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal([]byte(doc), crd); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if crd.Name == "" {
			continue
		}
		_, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create CRD %s: %w", crd.Name, err)
		}
		names = append(names, crd.Name)
	}
	return names, nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
