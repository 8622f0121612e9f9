//go:build tools

// Package tools pins kwok, the fake kubelet of the local cluster.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
