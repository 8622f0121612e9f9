package publish

import (
	"bytes"
	"encoding/pem"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The operator runs as this user, the one distroless's nonroot images use, so the chart's and
// the bundle's runAsNonRoot and any runAsUser: 65532 both hold.
const (
	NonRootUID  = 65532
	NonRootUser = "65532:65532"
)

// CACertificatesPath is where Go's crypto/x509 (and most TLS stacks) look for the system roots
// on Linux.
const CACertificatesPath = "/etc/ssl/certs/ca-certificates.crt"

// caCertificates is the Mozilla (NSS) root store as a PEM bundle, from
// golang.org/x/crypto/x509roots/fallback, whose version go.sum pins: the operator image's CA
// certificates change only when that module is updated, not with the machine that builds it.
// Roots NSS restricts with a distrust-after date are left out, because a PEM bundle cannot
// carry the restriction; every root in the bundle is trusted without conditions.
func caCertificates() []byte {
	var buf bytes.Buffer
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate})
	}
	return buf.Bytes()
}

// baseFiles is the operator image's file system besides the binary: what distroless's static
// nonroot image holds that the operator uses. The user and group databases name the non-root
// user, its home directory exists, /tmp is writable by anyone (sticky), and the CA bundle
// lets the operator verify TLS servers outside the cluster.
func baseFiles() []file {
	return []file{
		{Path: "/etc/passwd", Mode: 0o644, Body: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{Path: "/etc/group", Mode: 0o644, Body: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{Path: "/etc/nsswitch.conf", Mode: 0o644, Body: []byte("hosts: files dns\n")},
		{Path: CACertificatesPath, Mode: 0o644, Body: caCertificates()},
		{Path: "/home/nonroot", Dir: true, Mode: 0o700, UID: NonRootUID, GID: NonRootUID},
		{Path: "/root", Dir: true, Mode: 0o700},
		{Path: "/tmp", Dir: true, Mode: 0o1777},
	}
}
