package builtin_test

import (
	"slices"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/ctrlhost/ctrlhost/controllers/builtin"
	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

// kcmClientNames are the names KCM v1.37.1's controllers ask its client
// builder for (cmd/kube-controller-manager/app): under
// --use-service-account-credentials each is the ServiceAccount in
// kube-system the controller acts as, and the bootstrap RBAC policy grants
// its rules to that name, events included.
var kcmClientNames = map[string]string{
	"bootstrap-signer-controller":                                    "bootstrap-signer",
	"certificatesigningrequest-approving-controller":                 "certificate-controller",
	"certificatesigningrequest-cleaner-controller":                   "certificate-controller",
	"certificatesigningrequest-signing-controller":                   "certificate-controller",
	"clusterrole-aggregation-controller":                             "clusterrole-aggregation-controller",
	"cronjob-controller":                                             "cronjob-controller",
	"daemonset-controller":                                           "daemon-set-controller",
	"deployment-controller":                                          "deployment-controller",
	"disruption-controller":                                          "disruption-controller",
	"endpointslice-controller":                                       "endpointslice-controller",
	"endpointslice-mirroring-controller":                             "endpointslicemirroring-controller",
	"endpoints-controller":                                           "endpoint-controller",
	"ephemeral-volume-controller":                                    "ephemeral-volume-controller",
	"garbage-collector-controller":                                   "generic-garbage-collector",
	"horizontal-pod-autoscaler-controller":                           "horizontal-pod-autoscaler",
	"job-controller":                                                 "job-controller",
	"kube-apiserver-serving-clustertrustbundle-publisher-controller": "kube-apiserver-serving-clustertrustbundle-publisher",
	"legacy-serviceaccount-token-cleaner-controller":                 "legacy-service-account-token-cleaner",
	"namespace-controller":                                           "namespace-controller",
	"node-ipam-controller":                                           "node-controller",
	"node-lifecycle-controller":                                      "node-controller",
	"persistentvolume-protection-controller":                         "pv-protection-controller",
	"persistentvolumeclaim-protection-controller":                    "pvc-protection-controller",
	"pod-garbage-collector-controller":                               "pod-garbage-collector",
	"podcertificaterequest-cleaner-controller":                       "podcertificaterequestcleaner",
	"podgroup-protection-controller":                                 "podgroup-protection-controller",
	"replicaset-controller":                                          "replicaset-controller",
	"replicationcontroller-controller":                               "replication-controller",
	"resourcequota-controller":                                       "resourcequota-controller",
	"root-ca-certificate-publisher-controller":                       "root-ca-cert-publisher",
	"service-cidr-controller":                                        "service-cidrs-controller",
	"serviceaccount-controller":                                      "service-account-controller",
	"serviceaccount-token-controller":                                "tokens-controller",
	"statefulset-controller":                                         "statefulset-controller",
	"storageversion-garbage-collector-controller":                    "storage-version-garbage-collector",
	"taint-eviction-controller":                                      "node-controller",
	"token-cleaner-controller":                                       "token-cleaner",
	"ttl-after-finished-controller":                                  "ttl-after-finished-controller",
	"ttl-controller":                                                 "ttl-controller",
	"validatingadmissionpolicy-status-controller":                    "validatingadmissionpolicy-status-controller",
	"volumeattributesclass-protection-controller":                    "volumeattributesclass-protection-controller",
}

// Each native built-in names its client as KCM does (Descriptor.ClientName,
// with which the host writes its events) and asks its ClientBuilder for
// that name alone: a controller acting as another ServiceAccount than
// KCM's finds no RBAC rules for it on a cluster that runs with
// --use-service-account-credentials (a kwok cluster's conformance smoke
// saw no default ServiceAccount made in new namespaces, and node events
// forbidden).
func TestClientNamesAreKCMs(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:6443"}
	for _, b := range builtin.NewOptions().List() {
		d := b.Descriptor
		t.Run(d.Name(), func(t *testing.T) {
			want, ok := kcmClientNames[d.Name()]
			if !ok {
				t.Fatalf("no KCM client name in the table for %s; add KCM's", d.Name())
			}
			if got := d.ClientName(); got != want {
				t.Errorf("Descriptor.ClientName() = %q, want KCM's %q", got, want)
			}
			asked, _ := controllertest.ClientNames(t, d, cfg)
			if i := slices.IndexFunc(asked, func(n string) bool { return n != want }); i >= 0 {
				t.Errorf("the InitFunc asked its ClientBuilder for %q; KCM's controller asks for %q only",
					asked, want)
			}
		})
	}
}
