package gen

import (
	"fmt"
	"strings"

	"github.com/blang/semver/v4"
)

// OpenShiftVersionsKey is the bundle annotation (and bundle image label) OpenShift catalogs use
// to decide which OpenShift releases list the bundle. "v4.N" means 4.N and every later release.
const OpenShiftVersionsKey = "com.redhat.openshift.versions"

// openShiftMinorForKube maps a Kubernetes minor release to the OpenShift 4 minor release built on
// it (OpenShift 4.12 ships Kubernetes 1.25, and each later 4.N ships 1.(N+13)). The table is
// explicit rather than computed so that a floor outside it fails instead of guessing.
var openShiftMinorForKube = map[uint64]uint64{
	25: 12, 26: 13, 27: 14, 28: 15, 29: 16, 30: 17, 31: 18, 32: 19, 33: 20, 34: 21,
}

// OpenShiftVersions is the com.redhat.openshift.versions value for a CSV minKubeVersion: the
// first OpenShift release whose Kubernetes is at least that version, and every later one.
func OpenShiftVersions(minKubeVersion string) (string, error) {
	v, err := semver.ParseTolerant(strings.TrimPrefix(minKubeVersion, "v"))
	if err != nil {
		return "", fmt.Errorf("minKubeVersion %q: %w", minKubeVersion, err)
	}
	if v.Major != 1 {
		return "", fmt.Errorf("minKubeVersion %q is not a Kubernetes 1.x release", minKubeVersion)
	}
	// A patch floor (1.M.P) maps like 1.M: OpenShift 4.N follows the patches of its Kubernetes
	// minor release.
	minor := v.Minor
	ocp, ok := openShiftMinorForKube[minor]
	if !ok {
		return "", fmt.Errorf("minKubeVersion %q: no OpenShift release is recorded for Kubernetes 1.%d; extend openShiftMinorForKube in tests/tools/bundlegen/gen", minKubeVersion, minor)
	}
	return fmt.Sprintf("v4.%d", ocp), nil
}
