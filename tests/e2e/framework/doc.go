// Package framework is the shared harness of the e2e suites: one local cluster per suite run
// (started by Ginkgo process 1, reached by the others through its kubeconfig), a namespace
// per spec, deadlines for Eventually, and the hook that runs the operator in-process.
package framework
