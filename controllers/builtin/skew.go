package builtin

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/version"
)

// The kube-controller-manager release the native built-ins are (their
// behaviour, flags, defaults and the APIs they use), and so the API
// servers they may run against.
const (
	// kcmMajor and kcmMinor are that release's version: 1.37.
	kcmMajor = 1
	kcmMinor = 37
)

// CheckServerVersion applies KCM's version skew rule to the API server
// v (a discovery client's ServerVersion): a controller manager must not
// be newer than its API server, and may be at most one minor older. The
// native built-ins are KCM 1.37's and use 1.37's APIs, so only
// kube-apiserver 1.37 and 1.38 pass. The error names the server's version,
// the supported ones and what to do. A controller manager built on the
// built-ins calls it before it runs them (examples/kcm does), instead of
// failing later in a controller on a missing API or field.
func CheckServerVersion(v *version.Info) error {
	if v == nil {
		return fmt.Errorf("builtin: no API server version to check")
	}
	major, errMajor := strconv.Atoi(v.Major)
	// Some distributions append "+" to the minor ("37+").
	minor, errMinor := strconv.Atoi(strings.TrimSuffix(v.Minor, "+"))
	if errMajor != nil || errMinor != nil {
		return fmt.Errorf("builtin: the API server reports version %q (major %q, minor %q), "+
			"which is not a Kubernetes release number", v.GitVersion, v.Major, v.Minor)
	}
	switch {
	case major == kcmMajor && (minor == kcmMinor || minor == kcmMinor+1):
		return nil
	case major < kcmMajor || (major == kcmMajor && minor < kcmMinor):
		return fmt.Errorf("kube-apiserver %s is older than these controllers "+
			"(kube-controller-manager %d.%d): a controller manager must not be newer than its API "+
			"server, so this one runs against kube-apiserver %d.%d or %d.%d only; upgrade the "+
			"API servers first", v.GitVersion, kcmMajor, kcmMinor, kcmMajor, kcmMinor, kcmMajor,
			kcmMinor+1)
	}
	return fmt.Errorf("kube-apiserver %s is more than one minor newer than these controllers "+
		"(kube-controller-manager %d.%d), which run against kube-apiserver %d.%d or %d.%d only; "+
		"upgrade the controller manager", v.GitVersion, kcmMajor, kcmMinor, kcmMajor, kcmMinor,
		kcmMajor, kcmMinor+1)
}
