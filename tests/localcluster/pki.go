package localcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the paths of the certificates one cluster uses. Everything is generated fresh per
// start: a cluster lives for one suite or one `up`, so there is nothing to rotate.
type pki struct {
	dir string
	ca  authority // signs every serving and client certificate of the cluster
	// frontProxy signs only front-proxy-client, the certificate the aggregation layer presents
	// to extension API servers (metrics-server). A separate CA, as kubeadm does: a client
	// certificate from the cluster CA must not be able to assert X-Remote-User headers.
	frontProxy authority
}

// authority is one CA: its certificate and key.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// clientIdentity names one client certificate: the file stem, the user (CN) and groups (O).
type clientIdentity struct {
	name   string
	user   string
	groups []string
}

// The identities the control plane needs. KCM and scheduler use their bootstrap RBAC users;
// kwok and the admin are system:masters because kwok patches every node and pod.
// metrics-server has only the RBAC of its upstream manifest (metricsServerRBAC).
var clientIdentities = []clientIdentity{
	{name: "admin", user: "kubernetes-admin", groups: []string{"system:masters"}},
	{name: "kcm", user: "system:kube-controller-manager"},
	{name: "scheduler", user: "system:kube-scheduler"},
	{name: "kwok", user: "kwok-controller", groups: []string{"system:masters"}},
	{name: "apiserver-kubelet-client", user: "kube-apiserver-kubelet-client", groups: []string{"system:masters"}},
	{name: "metrics-server", user: metricsServerUser},
}

// frontProxyClientName is the CN of the aggregator's client certificate; kube-apiserver's
// --requestheader-allowed-names lists it, so extension servers accept only that certificate.
const frontProxyClientName = "front-proxy-client"

// generatePKI writes into dir: ca.{crt,key}; apiserver.{crt,key}; one client pair per
// identity; the serving pairs of kwok's kubelet endpoint (kwok-serving) and metrics-server
// (metrics-server-serving); front-proxy-ca.{crt,key} and front-proxy-client.{crt,key}; and
// the service-account signing key pair sa.{key,pub}.
func generatePKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir}
	var err error
	if p.ca, err = newAuthority(dir, "ca", "celld-localcluster-ca"); err != nil {
		return nil, err
	}
	if p.frontProxy, err = newAuthority(dir, "front-proxy-ca", "celld-localcluster-front-proxy-ca"); err != nil {
		return nil, err
	}
	loopback := []net.IP{net.ParseIP("127.0.0.1")}
	serving := map[string]*x509.Certificate{
		"apiserver": {
			Subject:     pkix.Name{CommonName: "kube-apiserver"},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
			DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		},
		// metrics-server scrapes https://<node InternalIP = 127.0.0.1>:<kwok port> and verifies
		// this certificate against ca.crt (--kubelet-certificate-authority)
		"kwok-serving": {Subject: pkix.Name{CommonName: "kwok-kubelet"}, IPAddresses: loopback, DNSNames: []string{"localhost"}},
		// the aggregator verifies the name <service>.<namespace>.svc, whatever address it dials
		"metrics-server-serving": {
			Subject: pkix.Name{CommonName: "metrics-server"}, IPAddresses: loopback,
			DNSNames: []string{"localhost", metricsServerService + "." + metricsServerNamespace + ".svc"},
		},
	}
	for name, c := range serving {
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		if err := p.sign(p.ca, name, c); err != nil {
			return nil, err
		}
	}
	for _, id := range clientIdentities {
		if err := p.sign(p.ca, id.name, clientCert(id.user, id.groups)); err != nil {
			return nil, err
		}
	}
	if err := p.sign(p.frontProxy, "front-proxy-client", clientCert(frontProxyClientName, nil)); err != nil {
		return nil, err
	}
	return p, writeServiceAccountKey(dir)
}

func clientCert(user string, groups []string) *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
}

// newAuthority creates a self-signed CA and writes NAME.crt and NAME.key.
func newAuthority(dir, name, cn string) (authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return authority{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return authority{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return authority{}, err
	}
	return authority{cert: cert, key: key}, writePair(dir, name, der, key)
}

// sign issues a leaf certificate from tmpl with ca and writes NAME.crt and NAME.key.
func (p *pki) sign(ca authority, name string, tmpl *x509.Certificate) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(10 * 365 * 24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	tmpl.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return fmt.Errorf("sign %s: %w", name, err)
	}
	return writePair(p.dir, name, der, key)
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// writeServiceAccountKey writes an RSA pair: service-account tokens are RS256 by default.
func writeServiceAccountKey(dir string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, "sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub)
}

func writePair(dir, name string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, name+".key"), "EC PRIVATE KEY", kb)
}

func writePEM(path, typ string, b []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}
