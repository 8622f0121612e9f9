//go:build tools

// Package tools pins the libraries the project builds with, so `go mod tidy` keeps the
// versions of the design card even before every package imports them. The executables
// (controller-gen, the ginkgo CLI, staticcheck) are pinned by go.mod's tool directives.
package tools

import (
	_ "github.com/onsi/ginkgo/v2"
	_ "github.com/onsi/gomega"
	_ "github.com/operator-framework/api/pkg/validation"
	_ "github.com/operator-framework/operator-lib/leader"
	_ "helm.sh/helm/v3/pkg/engine"
	_ "istio.io/client-go/pkg/apis/security/v1"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	_ "k8s.io/apimachinery/pkg/runtime"
	_ "k8s.io/client-go/kubernetes"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/gateway-api/apis/v1"
	_ "sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)
