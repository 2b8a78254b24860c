// Package builtin is the one list of ctrlhost's native built-in
// controllers, with their options, flags and feature gates: ctrlhost's
// counterpart of kube-controller-manager's NewControllerDescriptors. A
// program that hosts them all (examples/kcm) adds Options' flags, builds a
// feature gate with NewFeatureGate, and registers Descriptors; tests and
// the differential harness read List.
//
// Guarantees: every native built-in is listed once, by its KCM name
// (TestListIsComplete checks the list against the controllers/ packages);
// AddFlags adds each built-in's KCM flags once, with KCM's defaults (the
// upstream module's TestNativeBuiltinsAreKCMs compares them with KCM
// v1.37.1's); FeatureSpecs holds every gate a built-in consults, with its
// Kubernetes 1.37 default, and a gate two built-ins consult has one spec.
//
// Non-guarantees: the list holds the native built-ins only; KCM's other
// controllers are in the upstream module's drop-in. Options are read when
// Descriptors (or List) is called: call it after parsing flags.
package builtin

import (
	"fmt"
	"maps"

	"github.com/spf13/pflag"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/controllers/bootstrapsigner"
	"github.com/ctrlhost/ctrlhost/controllers/clusterroleaggregation"
	"github.com/ctrlhost/ctrlhost/controllers/cronjob"
	"github.com/ctrlhost/ctrlhost/controllers/csrapproving"
	"github.com/ctrlhost/ctrlhost/controllers/csrcleaner"
	"github.com/ctrlhost/ctrlhost/controllers/csrsigning"
	"github.com/ctrlhost/ctrlhost/controllers/ctbpublisher"
	"github.com/ctrlhost/ctrlhost/controllers/daemonset"
	"github.com/ctrlhost/ctrlhost/controllers/deployment"
	"github.com/ctrlhost/ctrlhost/controllers/disruption"
	"github.com/ctrlhost/ctrlhost/controllers/endpoints"
	"github.com/ctrlhost/ctrlhost/controllers/endpointslice"
	"github.com/ctrlhost/ctrlhost/controllers/endpointslicemirroring"
	"github.com/ctrlhost/ctrlhost/controllers/ephemeral"
	"github.com/ctrlhost/ctrlhost/controllers/garbagecollector"
	"github.com/ctrlhost/ctrlhost/controllers/hpa"
	"github.com/ctrlhost/ctrlhost/controllers/job"
	"github.com/ctrlhost/ctrlhost/controllers/legacytokencleaner"
	"github.com/ctrlhost/ctrlhost/controllers/namespace"
	"github.com/ctrlhost/ctrlhost/controllers/nodeipam"
	"github.com/ctrlhost/ctrlhost/controllers/nodelifecycle"
	"github.com/ctrlhost/ctrlhost/controllers/pcrcleaner"
	"github.com/ctrlhost/ctrlhost/controllers/podgc"
	"github.com/ctrlhost/ctrlhost/controllers/podgroupprotection"
	"github.com/ctrlhost/ctrlhost/controllers/pvcprotection"
	"github.com/ctrlhost/ctrlhost/controllers/pvprotection"
	"github.com/ctrlhost/ctrlhost/controllers/replicaset"
	"github.com/ctrlhost/ctrlhost/controllers/resourcequota"
	"github.com/ctrlhost/ctrlhost/controllers/rootcacertpublisher"
	"github.com/ctrlhost/ctrlhost/controllers/serviceaccount"
	"github.com/ctrlhost/ctrlhost/controllers/serviceaccounttoken"
	"github.com/ctrlhost/ctrlhost/controllers/servicecidr"
	"github.com/ctrlhost/ctrlhost/controllers/statefulset"
	"github.com/ctrlhost/ctrlhost/controllers/storageversiongc"
	"github.com/ctrlhost/ctrlhost/controllers/tainteviction"
	"github.com/ctrlhost/ctrlhost/controllers/tokencleaner"
	"github.com/ctrlhost/ctrlhost/controllers/ttl"
	"github.com/ctrlhost/ctrlhost/controllers/ttlafterfinished"
	"github.com/ctrlhost/ctrlhost/controllers/vacprotection"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/sharedflag"
)

// Options are the options of every native built-in, one field per
// package (ReplicaSet's serve both the replicaset and the
// replicationcontroller controllers, as KCM's do).
type Options struct {
	// ClusterName is KCM's --cluster-name (default "kubernetes"), which
	// kubeadm's command line sets. KCM v1.37 accepts it and none of its
	// controllers reads it (its readers, the cloud CIDR allocator and the
	// in-tree cloud volume plugins, are gone); no built-in reads it
	// either. It is here so that a KCM command line runs unchanged.
	ClusterName string

	ReplicaSet             replicaset.Options
	PodGC                  podgc.Options
	ServiceAccount         serviceaccount.Options
	TokenCleaner           tokencleaner.Options
	RootCACertPublisher    rootcacertpublisher.Options
	TTLAfterFinished       ttlafterfinished.Options
	Deployment             deployment.Options
	DaemonSet              daemonset.Options
	Job                    job.Options
	CronJob                cronjob.Options
	ServiceAccountToken    serviceaccounttoken.Options
	Namespace              namespace.Options
	ResourceQuota          resourcequota.Options
	Endpoints              endpoints.Options
	EndpointSlice          endpointslice.Options
	GarbageCollector       garbagecollector.Options
	ClusterRoleAggregation clusterroleaggregation.Options
	PVProtection           pvprotection.Options
	EndpointSliceMirroring endpointslicemirroring.Options
	PVCProtection          pvcprotection.Options
	Ephemeral              ephemeral.Options
	CSRSigning             csrsigning.Options
	CSRApproving           csrapproving.Options
	CSRCleaner             csrcleaner.Options
	BootstrapSigner        bootstrapsigner.Options
	LegacyTokenCleaner     legacytokencleaner.Options
	PCRCleaner             pcrcleaner.Options
	CTBPublisher           ctbpublisher.Options
	VACProtection          vacprotection.Options
	ServiceCIDR            servicecidr.Options
	StorageVersionGC       storageversiongc.Options
	PodGroupProtection     podgroupprotection.Options
	TTL                    ttl.Options
	TaintEviction          tainteviction.Options
	Disruption             disruption.Options
	NodeIPAM               nodeipam.Options
	NodeLifecycle          nodelifecycle.Options
	StatefulSet            statefulset.Options
	HPA                    hpa.Options
}

// NewOptions returns every built-in's options with KCM's defaults.
func NewOptions() *Options {
	return &Options{
		ClusterName:            "kubernetes",
		ReplicaSet:             replicaset.NewOptions(),
		PodGC:                  podgc.NewOptions(),
		ServiceAccount:         serviceaccount.NewOptions(),
		TokenCleaner:           tokencleaner.NewOptions(),
		RootCACertPublisher:    rootcacertpublisher.NewOptions(),
		TTLAfterFinished:       ttlafterfinished.NewOptions(),
		Deployment:             deployment.NewOptions(),
		DaemonSet:              daemonset.NewOptions(),
		Job:                    job.NewOptions(),
		CronJob:                cronjob.NewOptions(),
		ServiceAccountToken:    serviceaccounttoken.NewOptions(),
		Namespace:              namespace.NewOptions(),
		ResourceQuota:          resourcequota.NewOptions(),
		Endpoints:              endpoints.NewOptions(),
		EndpointSlice:          endpointslice.NewOptions(),
		GarbageCollector:       garbagecollector.NewOptions(),
		ClusterRoleAggregation: clusterroleaggregation.NewOptions(),
		PVProtection:           pvprotection.NewOptions(),
		EndpointSliceMirroring: endpointslicemirroring.NewOptions(),
		PVCProtection:          pvcprotection.NewOptions(),
		Ephemeral:              ephemeral.NewOptions(),
		CSRSigning:             csrsigning.NewOptions(),
		CSRApproving:           csrapproving.NewOptions(),
		CSRCleaner:             csrcleaner.NewOptions(),
		BootstrapSigner:        bootstrapsigner.NewOptions(),
		LegacyTokenCleaner:     legacytokencleaner.NewOptions(),
		PCRCleaner:             pcrcleaner.NewOptions(),
		CTBPublisher:           ctbpublisher.NewOptions(),
		VACProtection:          vacprotection.NewOptions(),
		ServiceCIDR:            servicecidr.NewOptions(),
		StorageVersionGC:       storageversiongc.NewOptions(),
		PodGroupProtection:     podgroupprotection.NewOptions(),
		TTL:                    ttl.NewOptions(),
		TaintEviction:          tainteviction.NewOptions(),
		Disruption:             disruption.NewOptions(),
		NodeIPAM:               nodeipam.NewOptions(),
		NodeLifecycle:          nodelifecycle.NewOptions(),
		StatefulSet:            statefulset.NewOptions(),
		HPA:                    hpa.NewOptions(),
	}
}

// Builtin is one native built-in as the list knows it.
type Builtin struct {
	// Descriptor is its descriptor, over the options as they were when
	// List was called.
	Descriptor descriptor.Descriptor
	// AddFlags adds its KCM flags to a flag set, bound to the Options; nil
	// when it has none. Two built-ins of one package share their flags.
	AddFlags func(*pflag.FlagSet)
	// FeatureSpecs are the feature gates it consults, with their
	// Kubernetes defaults; nil when it consults none.
	FeatureSpecs map[featuregate.Feature]featuregate.FeatureSpec
}

// List returns every native built-in over o, in the order KCM registers
// them.
func (o *Options) List() []Builtin {
	return []Builtin{
		{serviceaccounttoken.Descriptor(o.ServiceAccountToken), o.ServiceAccountToken.AddFlags,
			nil},
		{endpoints.Descriptor(o.Endpoints), o.Endpoints.AddFlags, nil},
		{endpointslice.Descriptor(o.EndpointSlice), o.EndpointSlice.AddFlags,
			endpointslice.FeatureSpecs()},
		{endpointslicemirroring.Descriptor(o.EndpointSliceMirroring),
			o.EndpointSliceMirroring.AddFlags, nil},
		{replicaset.ReplicationControllerDescriptor(o.ReplicaSet), o.ReplicaSet.AddFlags,
			replicaset.FeatureSpecs()},
		{podgc.Descriptor(o.PodGC), o.PodGC.AddFlags, nil},
		{resourcequota.Descriptor(o.ResourceQuota), o.ResourceQuota.AddFlags,
			resourcequota.FeatureSpecs()},
		{namespace.Descriptor(o.Namespace), o.Namespace.AddFlags, nil},
		{serviceaccount.Descriptor(o.ServiceAccount), nil, nil},
		{garbagecollector.Descriptor(o.GarbageCollector), o.GarbageCollector.AddFlags, nil},
		{daemonset.Descriptor(o.DaemonSet), o.DaemonSet.AddFlags, daemonset.FeatureSpecs()},
		{job.Descriptor(o.Job), o.Job.AddFlags, job.FeatureSpecs()},
		{podgroupprotection.Descriptor(o.PodGroupProtection), nil,
			podgroupprotection.FeatureSpecs()},
		{deployment.Descriptor(o.Deployment), o.Deployment.AddFlags, deployment.FeatureSpecs()},
		{replicaset.Descriptor(o.ReplicaSet), o.ReplicaSet.AddFlags, replicaset.FeatureSpecs()},
		{hpa.Descriptor(o.HPA), o.HPA.AddFlags, hpa.FeatureSpecs()},
		{disruption.Descriptor(o.Disruption), o.Disruption.AddFlags, nil},
		{statefulset.Descriptor(o.StatefulSet), o.StatefulSet.AddFlags,
			statefulset.FeatureSpecs()},
		{cronjob.Descriptor(o.CronJob), o.CronJob.AddFlags, nil},
		{csrsigning.Descriptor(o.CSRSigning), o.CSRSigning.AddFlags, nil},
		{csrapproving.Descriptor(o.CSRApproving), nil, nil},
		{csrcleaner.Descriptor(o.CSRCleaner), nil, nil},
		{pcrcleaner.Descriptor(o.PCRCleaner), nil, pcrcleaner.FeatureSpecs()},
		{ttl.Descriptor(o.TTL), nil, nil},
		{bootstrapsigner.Descriptor(o.BootstrapSigner), nil, nil},
		{tokencleaner.Descriptor(o.TokenCleaner), nil, nil},
		{nodeipam.Descriptor(o.NodeIPAM), o.NodeIPAM.AddFlags, nil},
		{nodelifecycle.Descriptor(o.NodeLifecycle), o.NodeLifecycle.AddFlags,
			nodelifecycle.FeatureSpecs()},
		{clusterroleaggregation.Descriptor(o.ClusterRoleAggregation), nil, nil},
		{pvcprotection.Descriptor(o.PVCProtection), nil, pvcprotection.FeatureSpecs()},
		{pvprotection.Descriptor(o.PVProtection), nil, nil},
		{vacprotection.Descriptor(o.VACProtection), nil, vacprotection.FeatureSpecs()},
		{ttlafterfinished.Descriptor(o.TTLAfterFinished), o.TTLAfterFinished.AddFlags, nil},
		{rootcacertpublisher.Descriptor(o.RootCACertPublisher), o.RootCACertPublisher.AddFlags,
			nil},
		{ctbpublisher.Descriptor(o.CTBPublisher), o.CTBPublisher.AddFlags,
			ctbpublisher.FeatureSpecs()},
		{ephemeral.Descriptor(o.Ephemeral), o.Ephemeral.AddFlags, nil},
		{storageversiongc.Descriptor(o.StorageVersionGC), nil, storageversiongc.FeatureSpecs()},
		{legacytokencleaner.Descriptor(o.LegacyTokenCleaner), o.LegacyTokenCleaner.AddFlags,
			nil},
		{tainteviction.Descriptor(o.TaintEviction), nil, tainteviction.FeatureSpecs()},
		{servicecidr.Descriptor(o.ServiceCIDR), nil, servicecidr.FeatureSpecs()},
	}
}

// Descriptors returns every native built-in's descriptor over o, in the
// order KCM registers them. Call it after parsing flags.
func (o *Options) Descriptors() []descriptor.Descriptor {
	list := o.List()
	out := make([]descriptor.Descriptor, len(list))
	for i, b := range list {
		out[i] = b.Descriptor
	}
	return out
}

// AddFlags adds every built-in's KCM flags to fs, and KCM's --cluster-name,
// once each (the service-account token controller shares --root-ca-file
// with the root-CA publisher).
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	sharedflag.String(fs, &o.ClusterName, "cluster-name",
		"The instance prefix for the cluster. Accepted as KCM accepts it; no controller reads it.")
	o.ReplicaSet.AddFlags(fs)
	o.PodGC.AddFlags(fs)
	o.ServiceAccount.AddFlags(fs)
	o.TokenCleaner.AddFlags(fs)
	o.RootCACertPublisher.AddFlags(fs)
	o.CTBPublisher.AddFlags(fs)
	o.TTLAfterFinished.AddFlags(fs)
	o.Deployment.AddFlags(fs)
	o.DaemonSet.AddFlags(fs)
	o.Job.AddFlags(fs)
	o.CronJob.AddFlags(fs)
	o.CSRSigning.AddFlags(fs)
	o.ServiceAccountToken.AddFlags(fs)
	o.Namespace.AddFlags(fs)
	o.ResourceQuota.AddFlags(fs)
	o.Endpoints.AddFlags(fs)
	o.EndpointSlice.AddFlags(fs)
	o.EndpointSliceMirroring.AddFlags(fs)
	o.GarbageCollector.AddFlags(fs)
	o.Ephemeral.AddFlags(fs)
	o.LegacyTokenCleaner.AddFlags(fs)
	o.Disruption.AddFlags(fs)
	o.NodeIPAM.AddFlags(fs)
	o.NodeLifecycle.AddFlags(fs)
	o.StatefulSet.AddFlags(fs)
	o.HPA.AddFlags(fs)
}

// FeatureSpecs returns every feature gate a built-in consults, with its
// Kubernetes 1.37 default. A gate two built-ins consult with different
// specs is an error (a bug in one of them).
func FeatureSpecs() (map[featuregate.Feature]featuregate.FeatureSpec, error) {
	out := map[featuregate.Feature]featuregate.FeatureSpec{}
	seen := map[featuregate.Feature]string{}
	for _, b := range NewOptions().List() {
		for f, spec := range b.FeatureSpecs {
			if prev, ok := out[f]; ok && !sameSpec(prev, spec) {
				return nil, fmt.Errorf("builtin: feature gate %s: %s says %+v, %s says %+v",
					f, seen[f], prev, b.Descriptor.Name(), spec)
			}
			out[f], seen[f] = spec, b.Descriptor.Name()
		}
	}
	return out, nil
}

// NewFeatureGate returns a feature gate that knows every gate the built-ins
// consult, at its default: give it to manager.Builder.WithFeatureGate so
// that --feature-gates sets them.
func NewFeatureGate() (featuregate.MutableFeatureGate, error) {
	specs, err := FeatureSpecs()
	if err != nil {
		return nil, err
	}
	g := featuregate.NewFeatureGate()
	if err := g.Add(maps.Clone(specs)); err != nil {
		return nil, fmt.Errorf("builtin: %w", err)
	}
	return g, nil
}

// sameSpec compares two specs of one gate by what they say, not where
// their versions are stored.
func sameSpec(a, b featuregate.FeatureSpec) bool {
	return a.Default == b.Default && a.LockToDefault == b.LockToDefault &&
		a.PreRelease == b.PreRelease && a.Version.String() == b.Version.String()
}
