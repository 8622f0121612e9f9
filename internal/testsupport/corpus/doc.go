// Package corpus is the shared fixtures of the tests: the set of valid and invalid CelldFleets
// that proves admission (the pure test runs it through Validate, the API test through a real
// kube-apiserver, and both must give the same verdict and, for CEL rules, the same message),
// and the strict reader of the config/samples files.
//
// It is imported by _test.go files only and never by production code, so none of it is
// compiled into the operator binary; imports_test.go fails when a non-test file outside
// internal/testsupport imports it.
package corpus
