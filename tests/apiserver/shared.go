package apiserver

import (
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Shared is one API server for a whole test package, started on first use so the package's
// pure tests never wait for it. Keep it in a package variable and call Stop from TestMain.
type Shared struct {
	// Dirs are the CRD directories installed (see Start).
	Dirs []string
	// Schemes are added to the client's scheme.
	Schemes []func(*runtime.Scheme) error

	once   sync.Once
	cfg    *rest.Config
	client client.Client
	stop   func()
	err    error
}

func (s *Shared) start() {
	s.once.Do(func() {
		scheme := runtime.NewScheme()
		for _, add := range s.Schemes {
			if s.err = add(scheme); s.err != nil {
				return
			}
		}
		if s.cfg, s.stop, s.err = Start(s.Dirs...); s.err != nil {
			return
		}
		s.client, s.err = client.New(s.cfg, client.Options{Scheme: scheme})
	})
}

// Client starts the server if needed and returns a client of it; a server that cannot start
// fails t (a missing binary is a failure, never a skip).
func (s *Shared) Client(t testing.TB) client.Client {
	t.Helper()
	s.start()
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.client
}

// Config is the server's REST config; the server must have been started by Client.
func (s *Shared) Config() *rest.Config { return s.cfg }

// Stop stops the server if it was started.
func (s *Shared) Stop() {
	if s.stop != nil {
		s.stop()
	}
}
