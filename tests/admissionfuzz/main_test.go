package admissionfuzz

import (
	"os"

	"github.com/go-logr/logr"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/tests/apiserver"
)

// server is the package's one etcd and kube-apiserver, started by the first test that needs
// it: the mutator's own tests never wait for it.
var server = &apiserver.Shared{
	Dirs:    []string{"config/crd/bases"},
	Schemes: []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1.AddToScheme},
}

func TestMain(m *testing.M) {
	// the reconciler logs every mutation it makes; thousands of passes would drown the report
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	server.Stop()
	os.Exit(code)
}
