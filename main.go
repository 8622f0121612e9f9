// Command manager runs celld-operator: the CelldFleet reconciler (Go, workload lifecycle,
// reservations, self-healing), the Helm half that renders each fleet's static children from
// an embedded chart, and the leader-only /state observer.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/application"
	"github.com/celld/celld-operator/controllers/fleet"
	"github.com/celld/celld-operator/controllers/preview"
	"github.com/celld/celld-operator/controllers/upgradeable"
	"github.com/celld/celld-operator/internal/opmetrics"
)

// version is set at link time (-X main.version=...).
var version = "dev"

// minReplacementDelay is the smallest --member-replacement-delay accepted: a shorter delay
// would replace members that are only restarting, and Kubernetes alone needs about six
// minutes to force-detach a volume from a lost node.
const minReplacementDelay = time.Minute

// minApplicationRefresh is the shortest --application-refresh accepted: below it, every settled
// fleet's status is rewritten about as often as it is observed.
const minApplicationRefresh = time.Minute

type options struct {
	metrics                    opmetrics.Serving
	probeAddr                  string
	pprofAddr                  string
	leaderElect, showVersion   bool
	watchesFile                string
	storageProvisioners        string
	fleet                      fleet.Options
	allowShortReplacementDelay bool
	applicationRefresh         time.Duration
	zap                        zap.Options
	config                     configSettings
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "celld-operator:", err)
		os.Exit(1)
	}
}

// parseFlags reads the command line and the environment; it returns an error for a value the
// operator refuses.
func parseFlags(args []string) (*options, error) { return parseSettings(args, nil) }

// parseSettings reads the command line, the environment and, when cm is not nil, the
// operator's ConfigMap (config.go): a flag given on the command line wins over the legacy
// environment variables, which win over the ConfigMap, which wins over the default.
func parseSettings(args []string, cm *configSource) (*options, error) {
	return parseWith(args, os.Getenv, cm)
}

func parseWith(args []string, getenv func(string) string, cm *configSource) (*options, error) {
	o := &options{fleet: fleet.DefaultOptions()}
	fs := flag.NewFlagSet("celld-operator", flag.ContinueOnError)
	fs.StringVar(&o.metrics.BindAddress, "metrics-bind-address", "0", "address of the metrics endpoint (\":8084\"); \"0\" disables it")
	fs.BoolVar(&o.metrics.Secure, "metrics-secure", true, "serve metrics over HTTPS to requests whose bearer token may get /metrics (TokenReview and SubjectAccessReview; the ClusterRole "+opmetrics.ReaderClusterRole+"); false serves plain HTTP to anyone: local runs only, never in a cluster")
	fs.StringVar(&o.metrics.CertDir, "metrics-cert-dir", "", "directory holding tls.crt and tls.key for the metrics endpoint (reloaded on change); empty or missing files: a self-signed certificate")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8082", "address of /healthz and /readyz")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "address of Go's /debug/pprof endpoints (\"127.0.0.1:8085\"), for profiling; empty disables them. Never expose it outside the Pod")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "elect one active operator replica through a Lease in --operator-namespace")
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
	fs.StringVar(&o.watchesFile, "watches-file", "", "watches.yaml mapping GVKs to charts; empty uses the embedded file")
	fs.BoolVar(&o.fleet.NetworkPolicyEnforced, "network-policy-enforced", false, "administrator attestation that the cluster's CNI enforces NetworkPolicy; fleets are not provisioned without it")
	fs.DurationVar(&o.fleet.MemberReplacementDelay, "member-replacement-delay", o.fleet.MemberReplacementDelay, "how long a lone down member waits before it is replaced on a fresh disk (minimum 1m)")
	fs.StringVar(&o.fleet.OperatorServiceAccount, "operator-service-account", envOr("POD_SERVICE_ACCOUNT", o.fleet.OperatorServiceAccount), "the operator's ServiceAccount (default: POD_SERVICE_ACCOUNT, else celld-operator), admitted to members' peer port by the mesh policy")
	fs.StringVar(&o.fleet.OperatorNamespace, "operator-namespace", envOr("POD_NAMESPACE", o.fleet.OperatorNamespace), "the operator's namespace: NetworkPolicy peer and leader-election namespace")
	fs.StringVar(&o.storageProvisioners, "storage-provisioners", strings.Join(o.fleet.StorageProvisioners, ","), "comma-separated CSI provisioners accepted for PersistentFleet StorageClasses")
	// Test timers: e2e shortens the seed's windows so scenarios run in minutes. Never change
	// them in production.
	fs.DurationVar(&o.fleet.AbsorbWindow, "absorb-window", o.fleet.AbsorbWindow, "how long every other member must have been ready before a lone down member is replaced (testing only)")
	fs.DurationVar(&o.fleet.TerminationMargin, "termination-margin", o.fleet.TerminationMargin, "how long past its grace a terminating member is force-deleted (testing only)")
	fs.DurationVar(&o.fleet.RequeuePeriod, "requeue-period", 0, "override of watches.yaml's reconcilePeriod: how often a settled fleet is re-examined without an event (default 10m)")
	fs.DurationVar(&o.fleet.WaitingRequeue, "waiting-requeue-period", o.fleet.WaitingRequeue, "how often a fleet that waits for something no watch sees (blocked, provisioning) is re-examined (testing only)")
	fs.IntVar(&o.fleet.MaxConcurrentReconciles, "max-concurrent-reconciles", 0, "override of watches.yaml's maxConcurrentReconciles (default 16)")
	fs.BoolVar(&o.allowShortReplacementDelay, "unsafe-allow-short-replacement-delay", false, "accept --member-replacement-delay below 1m (e2e only)")
	fs.DurationVar(&o.applicationRefresh, "application-refresh", application.DefaultOptions().Refresh, "how long an unchanged application observation goes before status.application.observedAt is written again (at least 1m); longer: fewer status writes of settled fleets, an older observedAt")
	o.zap = zap.Options{Development: false, TimeEncoder: zapcore.RFC3339NanoTimeEncoder}
	o.zap.BindFlags(fs)
	o.config.bind(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := o.config.apply(fs, getenv, cm); err != nil {
		return nil, err
	}
	if o.fleet.MemberReplacementDelay < minReplacementDelay && !o.allowShortReplacementDelay {
		return nil, fmt.Errorf("%s=%s is below the minimum of %s: a shorter delay replaces members that are only restarting; use at least 1m", o.config.where("member-replacement-delay"), o.fleet.MemberReplacementDelay, minReplacementDelay)
	}
	if o.applicationRefresh < minApplicationRefresh {
		return nil, fmt.Errorf("--application-refresh=%s is below the minimum of %s: settled fleets' status would be rewritten at nearly every observation; use at least 1m", o.applicationRefresh, minApplicationRefresh)
	}
	o.fleet.StorageProvisioners = splitList(o.storageProvisioners)
	if len(o.fleet.StorageProvisioners) == 0 {
		return nil, fmt.Errorf("%s must name at least one CSI provisioner", o.config.where("storage-provisioners"))
	}
	return o, nil
}

func run(args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if o.showVersion {
		fmt.Println(version)
		return nil
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	log := ctrl.Log.WithName("setup")
	restConfig := ctrl.GetConfigOrDie()
	if o, err = loadConfig(restConfig, args, o, log); err != nil {
		return err
	}

	watches, err := loadWatches(o.watchesFile)
	if err != nil {
		return err
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1.AddToScheme(scheme); err != nil {
		return err
	}
	// Managed fields are stripped from cached objects (fleets, previews, reservations,
	// StorageClasses): nothing reads them, and they were a fifth of each cached fleet.
	cacheOpts := cache.Options{DefaultTransform: cache.TransformStripManagedFields()}
	if ns := splitList(os.Getenv("WATCH_NAMESPACE")); len(ns) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, n := range ns {
			cacheOpts.DefaultNamespaces[n] = cache.Config{}
		}
		log.Info("watching namespaces", "namespaces", ns)
		o.fleet.Namespaces = ns
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                        scheme,
		Cache:                         cacheOpts,
		Metrics:                       opmetrics.ServerOptions(o.metrics),
		HealthProbeBindAddress:        o.probeAddr,
		PprofBindAddress:              o.pprofAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              "celld-operator.celld.eric.dev",
		LeaderElectionNamespace:       o.fleet.OperatorNamespace,
		LeaderElectionReleaseOnCancel: true,
		// A standby tries every 0.5–1.1 s (client-go adds up to 120 % jitter), so a released
		// Lease is taken in about a second; the lease duration (15 s) and renew deadline (10 s)
		// keep controller-runtime's defaults (docs/operations.md, High availability).
		LeaseDuration: new(15 * time.Second),
		RenewDeadline: new(10 * time.Second),
		RetryPeriod:   new(500 * time.Millisecond),
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	r, err := fleet.Setup(mgr, o.fleet, watches)
	if err != nil {
		return fmt.Errorf("set up the fleet controller: %w", err)
	}
	if err := preview.Setup(mgr, r.Direct, r.Options.MaxConcurrentReconciles); err != nil {
		return fmt.Errorf("set up the preview controller: %w", err)
	}
	observe := application.DefaultOptions()
	observe.Refresh = o.applicationRefresh
	mc, err := metricsclient.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("the Metrics API client: %w", err)
	}
	// one collection serves both: status.application and the capacity policy's samples
	observe.Capacity, observe.Metrics = r.Memory.Observed, application.MetricsAPI{Client: mc}
	if err := application.Add(mgr, observe, r.Caches); err != nil {
		return fmt.Errorf("set up the application observer: %w", err)
	}
	// Under OLM (OPERATOR_CONDITION_NAME set), Upgradeable on the OperatorCondition follows
	// the fleets; elsewhere nothing is added.
	if olm, err := upgradeable.Add(mgr, upgradeable.Options{Pods: r.Caches}); err != nil {
		return fmt.Errorf("set up the OperatorCondition: %w", err)
	} else if olm {
		log.Info("under OLM: the OperatorCondition's Upgradeable follows the fleets", "operatorCondition", os.Getenv(upgradeable.EnvConditionName))
	}
	if err := opmetrics.RegisterBuildInfo(crmetrics.Registry, version); err != nil {
		return fmt.Errorf("register celld_operator_build_info: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	reportClusterAccess(mgr.GetConfig(), log)
	log.Info("starting celld-operator", "version", version, "networkPolicyEnforced", o.fleet.NetworkPolicyEnforced,
		"memberReplacementDelay", o.fleet.MemberReplacementDelay.String(), "operatorNamespace", o.fleet.OperatorNamespace,
		"resyncPeriod", r.Options.RequeuePeriod.String(), "maxConcurrentReconciles", r.Options.MaxConcurrentReconciles,
		"watchDependentResources", r.Options.WatchDependentResources,
		"metricsBindAddress", o.metrics.BindAddress, "metricsSecure", o.metrics.Secure)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// clusterReads are the cluster-wide reads the manager's cache needs before any fleet is
// reconciled. Without them the operator waits rather than exits (no crash loop), and says why.
var clusterReads = []authorizationv1.ResourceAttributes{
	{Group: v1.GroupVersion.Group, Resource: "celldfleets", Verb: "list"},
	{Group: v1.GroupVersion.Group, Resource: "celldfleets", Verb: "watch"},
	{Group: v1.GroupVersion.Group, Resource: "celldpreviews", Verb: "list"},
	{Group: v1.GroupVersion.Group, Resource: "celldpreviews", Verb: "watch"},
	{Group: "storage.k8s.io", Resource: "storageclasses", Verb: "list"},
	{Group: "storage.k8s.io", Resource: "storageclasses", Verb: "watch"},
}

// reportClusterAccess logs, once at start, every cluster-wide read the operator's
// ServiceAccount lacks, naming the ClusterRole to fix.
func reportClusterAccess(cfg *rest.Config, log logr.Logger) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Error(err, "cannot check the operator's access")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, attrs := range clusterReads {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}
		got, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			log.Error(err, "cannot check the operator's access", "verb", attrs.Verb, "resource", attrs.Resource)
			continue
		}
		if !got.Status.Allowed {
			log.Error(nil, "the operator may not read a kind it needs cluster-wide; it waits until it may: apply the ClusterRole celld-operator (config/rbac/role.yaml, or the chart's rbac-cluster.yaml)",
				"verb", attrs.Verb, "group", attrs.Group, "resource", attrs.Resource)
		}
	}
}

func splitList(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
