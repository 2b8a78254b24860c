package manager

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ctrlhost/ctrlhost/serving"
)

// NewOperatorOptions puts the Lease in the pod's namespace (its
// ServiceAccount's namespace file, else $POD_NAMESPACE, else KCM's
// kube-system) and leaves the port to the operator.
func TestNewOperatorOptions(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "namespace")
	old := serviceAccountNamespaceFile
	t.Cleanup(func() { serviceAccountNamespaceFile = old })
	serviceAccountNamespaceFile = file

	t.Setenv("POD_NAMESPACE", "")
	if o := NewOperatorOptions(); o.LeaderElection.Namespace != "kube-system" || o.Serving.SecurePort != serving.PortDisabled ||
		!o.LeaderElect {
		t.Errorf("outside a pod: namespace %q, port %d, elect %v; want kube-system, disabled, true",
			o.LeaderElection.Namespace, o.Serving.SecurePort, o.LeaderElect)
	}
	t.Setenv("POD_NAMESPACE", "from-env")
	if o := NewOperatorOptions(); o.LeaderElection.Namespace != "from-env" {
		t.Errorf("with $POD_NAMESPACE: %q", o.LeaderElection.Namespace)
	}
	if err := os.WriteFile(file, []byte("widgets-system\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if o := NewOperatorOptions(); o.LeaderElection.Namespace != "widgets-system" {
		t.Errorf("in a pod: %q, want the pod's namespace", o.LeaderElection.Namespace)
	}
}
