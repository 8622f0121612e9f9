//go:build tools

// Package tools pins metrics-server, the Metrics API of the local cluster.
package tools

import _ "sigs.k8s.io/metrics-server/cmd/metrics-server"
