package descriptor

import (
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/shard"
)

// Descriptor describes one controller. Build it with New and the With…
// methods; the zero Descriptor is invalid (it has no name).
type Descriptor struct {
	name              string
	init              InitFunc
	aliases           []string
	featureGates      []featuregate.Feature
	cloud             bool
	disabledByDefault bool
	startFirst        bool
	noLeaderElection  bool
	sharded           bool
	keying            shard.Keying
	informers         []schema.GroupVersionResource
	indexers          map[schema.GroupVersionResource]cache.Indexers
	objectTypes       map[schema.GroupVersionResource]runtime.Object
	reads             map[schema.GroupVersionResource][]string
	validators        []func() error
	eventSource       string
	clientName        string
	served            []schema.GroupVersionResource
}

// New returns a descriptor for the controller with the given canonical name.
// Names are validated by NewSet, not here, so that every problem of a registry
// is reported at once.
func New(name string, init InitFunc) Descriptor {
	return Descriptor{name: name, init: init}
}

// WithAliases returns a copy that also answers to the given names in
// --controllers and in leader-migration configuration.
func (d Descriptor) WithAliases(aliases ...string) Descriptor {
	d.aliases = append(slices.Clone(d.aliases), aliases...)
	return d
}

// WithFeatureGates returns a copy that is skipped unless every given feature
// gate is enabled.
func (d Descriptor) WithFeatureGates(gates ...featuregate.Feature) Descriptor {
	d.featureGates = append(slices.Clone(d.featureGates), gates...)
	return d
}

// WithInformers returns a copy that declares the cluster-wide informers its
// InitFunc requests, by resource (typed where client-go has the type, as
// Context.ObjectOrMetadataInformerFactory gives them). Declaring them is
// optional: a host with warm standby keeps them synced on a follower, so
// that the controller starts on warm caches when the follower wins the
// lease. Declaring them also promises that the InitFunc is ready for its
// event handlers to be called as soon as it registers them (a running
// informer replays its objects at once): whatever the handlers use, such as
// the work queue, must exist before AddEventHandler. A controller that
// declares its informers is taken at its word about the typed informers
// it requests: a warm set keeps whole objects of a resource for a
// controller that did not declare what it reads of it (WithReads), unless
// its declared informers leave that resource out.
func (d Descriptor) WithInformers(gvrs ...schema.GroupVersionResource) Descriptor {
	d.informers = append(slices.Clone(d.informers), gvrs...)
	return d
}

// WithIndexers returns a copy that declares indexers its InitFunc adds to
// gvr's informer (and declares that informer, as WithInformers). A host that
// keeps the informer warm (warm standby) adds them before the informer
// starts: adding an index to a running informer indexes every object it
// holds at once, on the new leader's path to its first action (about 30 ms
// for 50,000 pods). The InitFunc must therefore accept finding an index of
// the same name already in place, and an index name must mean one function
// across every descriptor that declares it.
func (d Descriptor) WithIndexers(
	gvr schema.GroupVersionResource,
	indexers cache.Indexers,
) Descriptor {
	if !slices.Contains(d.informers, gvr) {
		d = d.WithInformers(gvr)
	}
	all := make(map[schema.GroupVersionResource]cache.Indexers, len(d.indexers)+1)
	for k, v := range d.indexers {
		all[k] = maps.Clone(v)
	}
	if all[gvr] == nil {
		all[gvr] = cache.Indexers{}
	}
	maps.Copy(all[gvr], indexers)
	d.indexers = all
	return d
}

// WithObjectType returns a copy that declares gvr's informer (as
// WithInformers) and that its InitFunc reads it as objects of obj's Go type
// through informers.Custom, for a custom resource without generated code:
// under warm standby that typed informer is the one kept warm. obj is a
// prototype (a *T with zero fields does); it is copied, never modified.
func (d Descriptor) WithObjectType(gvr schema.GroupVersionResource, obj runtime.Object) Descriptor {
	if !slices.Contains(d.informers, gvr) {
		d = d.WithInformers(gvr)
	}
	all := maps.Clone(d.objectTypes)
	if all == nil {
		all = map[schema.GroupVersionResource]runtime.Object{}
	}
	all[gvr] = obj.DeepCopyObject()
	d.objectTypes = all
	return d
}

// WithReads returns a copy that declares which fields of gvr's objects (a
// resource with a typed informer) its controller reads, as JSON field
// paths from the object's root: "spec.nodeName", "status",
// "spec.containers.resources". A path keeps everything under it, goes
// through pointers and lists (each element keeps the same fields), and
// cannot go into a map. Metadata, apiVersion and kind are always kept, so
// no path at all declares metadata only. Calling it again for gvr adds
// paths.
//
// The host then drops, before they reach the cache, the fields of gvr's
// objects that none of the controllers sharing the informer reads, which
// is most of a cluster's memory for pods. A controller that did not
// declare gvr reads it whole, and so does every controller that shares
// its informer: declaring is optional, and safe to leave out. A declared
// controller that reads a field it did not declare reads its zero value:
// its unit tests catch that when their fixtures go through
// informers.Fields.Prune (Reads gives the Fields). manager.Builder.Build
// rejects a path that names no field.
func (d Descriptor) WithReads(gvr schema.GroupVersionResource, paths ...string) Descriptor {
	all := make(map[schema.GroupVersionResource][]string, len(d.reads)+1)
	for k, v := range d.reads {
		all[k] = slices.Clone(v)
	}
	all[gvr] = append(all[gvr], paths...)
	if all[gvr] == nil {
		all[gvr] = []string{}
	}
	d.reads = all
	return d
}

// ReadsMetadataOnly returns a copy that declares that, of every resource it
// does not name in WithReads, its controller reads only the metadata of
// the objects (a garbage collector, that reads owner references of
// whatever it watches). It is WithReads of the zero GroupVersionResource
// (informers.AnyResource) with no path.
func (d Descriptor) ReadsMetadataOnly() Descriptor {
	return d.WithReads(schema.GroupVersionResource{})
}

// Reads returns what the controller declared it reads of each resource
// (WithReads, ReadsMetadataOnly under the zero key), a copy; a resource
// missing from it is read whole. Its type converts to informers.Fields.
func (d Descriptor) Reads() map[schema.GroupVersionResource][]string {
	out := make(map[schema.GroupVersionResource][]string, len(d.reads))
	for k, v := range d.reads {
		out[k] = slices.Clone(v)
	}
	return out
}

// ObjectType returns the Go type declared for gvr's informer
// (WithObjectType), a fresh copy of the prototype; nil if none.
func (d Descriptor) ObjectType(gvr schema.GroupVersionResource) runtime.Object {
	if obj, ok := d.objectTypes[gvr]; ok {
		return obj.DeepCopyObject()
	}
	return nil
}

// WithEventSource returns a copy whose events name component as their
// source (Context.EventRecorder), instead of the canonical name: some of
// KCM's controllers record under another name (the endpoints controller
// as "endpoint-controller"), and users filter events by it.
func (d Descriptor) WithEventSource(component string) Descriptor {
	d.eventSource = component
	return d
}

// EventSource is the source component of the controller's events: the
// WithEventSource name, else the canonical name.
func (d Descriptor) EventSource() string {
	if d.eventSource != "" {
		return d.eventSource
	}
	return d.name
}

// WithClientName returns a copy whose client is named name: the name the
// controller asks its ClientBuilder for, which is the ServiceAccount it acts
// as under --use-service-account-credentials. KCM names some controllers'
// clients apart from the controllers (the node lifecycle controller acts as
// "node-controller"), and its RBAC rules are granted to those names. The
// host writes the controller's events (Context.EventRecorder) with a client
// of this name, as KCM's controllers write theirs with their own client.
func (d Descriptor) WithClientName(name string) Descriptor {
	d.clientName = name
	return d
}

// ClientName is the name of the controller's client: the WithClientName
// name, else the canonical name.
func (d Descriptor) ClientName() string {
	if d.clientName != "" {
		return d.clientName
	}
	return d.name
}

// CloudProvider returns a copy marked as a cloud-provider loop: it is skipped
// unless the host includes cloud loops.
func (d Descriptor) CloudProvider() Descriptor {
	d.cloud = true
	return d
}

// DisabledByDefault returns a copy that "*" in --controllers does not enable;
// it runs only when named explicitly.
func (d Descriptor) DisabledByDefault() Descriptor {
	d.disabledByDefault = true
	return d
}

// StartFirst returns a copy that is built and running before any other
// InitFunc of the term is called (KCM does this for the service-account token
// controller, whose tokens the others need).
func (d Descriptor) StartFirst() Descriptor {
	d.startFirst = true
	return d
}

// WithoutLeaderElection returns a copy that runs on every replica, outside the
// leader-elected terms, for as long as the manager runs.
func (d Descriptor) WithoutLeaderElection() Descriptor {
	d.noLeaderElection = true
	return d
}

// Sharded returns a copy whose work may be shared among replicas: when the
// host shards (manager.Options.Sharding), every replica runs it at once,
// each over informers that hold only the slots of the key space it owns,
// with keys cut by keying (shard.ByNamespace: a namespace's objects land in
// one slot, so a ReplicaSet sees its pods; shard.ByUID: objects spread one
// by one). A host that does not shard runs it as any leader-elected
// controller.
//
// The controller must work each object from what its slot's informers hold
// and never need objects of other slots. Filtered to the slot: typed
// informers of pods, replicationcontrollers, serviceaccounts, configmaps,
// secrets, services, endpoints, events, namespaces, replicasets,
// deployments, daemonsets, statefulsets, controllerrevisions, jobs and
// cronjobs; dynamic and custom resource informers (informers.Custom) of
// every namespaced resource, and under shard.ByUID of every resource.
// Holding every slot's objects: typed informers of other resources,
// cluster-scoped resources through the dynamic client under
// shard.ByNamespace, and metadata informers. A sharded controller runs under
// leader election and is neither StartFirst nor WithoutLeaderElection.
func (d Descriptor) Sharded(keying shard.Keying) Descriptor {
	d.sharded, d.keying = true, keying
	return d
}

// WhenServed returns a copy that runs only while the API server serves
// every given resource: a controller of a custom resource whose
// CustomResourceDefinition may be installed after the host starts, or
// removed while it runs, or of an aggregated API that may be away. In each
// term the host builds and starts it once discovery lists all of them, and
// stops it (within ControllerShutdownTimeout, as a term stops its
// controllers) once one is gone; it starts it again when they are back.
// Such a controller holds the term's informers as any controller started
// while the term runs does: it shares those that run already (and keep
// every field it reads) with the term's other controllers, and gets new
// ones for the rest, started with it. When it stops, the event handlers it
// added are removed and the informers no other controller holds are
// stopped, their caches freed. An index it added to a shared informer
// stays there (client-go cannot drop an index); adding it again, under the
// same name with the same function, shares it. It cannot be StartFirst. Until its resources are
// served it is in phase
// "unserved", which passes readiness with a note naming what is missing.
func (d Descriptor) WhenServed(gvrs ...schema.GroupVersionResource) Descriptor {
	d.served = append(slices.Clone(d.served), gvrs...)
	return d
}

// Served returns the resources the controller waits for (WhenServed).
func (d Descriptor) Served() []schema.GroupVersionResource { return slices.Clone(d.served) }

// WithValidator returns a copy whose options are checked by v when the
// registry is validated (manager.Builder.Build), so that a bad flag value of
// a built-in controller is reported with every other problem, before
// anything starts. v must not have side effects.
func (d Descriptor) WithValidator(v func() error) Descriptor {
	d.validators = append(slices.Clone(d.validators), v)
	return d
}

// Name returns the canonical name: the one --controllers, health checks,
// metrics labels and logs use; aliases resolve to it.
func (d Descriptor) Name() string { return d.name }

// Init returns the InitFunc the host calls once per term to build the
// controller.
func (d Descriptor) Init() InitFunc { return d.init }

// Aliases returns a copy of the aliases.
func (d Descriptor) Aliases() []string { return slices.Clone(d.aliases) }

// FeatureGates returns a copy of the required feature gates.
func (d Descriptor) FeatureGates() []featuregate.Feature { return slices.Clone(d.featureGates) }

// Informers returns the declared informers (WithInformers).
func (d Descriptor) Informers() []schema.GroupVersionResource { return slices.Clone(d.informers) }

// Indexers returns the indexers declared for gvr's informer (WithIndexers).
func (d Descriptor) Indexers(gvr schema.GroupVersionResource) cache.Indexers {
	return maps.Clone(d.indexers[gvr])
}

// IsCloudProvider reports whether the controller is a cloud-provider loop.
func (d Descriptor) IsCloudProvider() bool { return d.cloud }

// IsDisabledByDefault reports whether "*" leaves the controller off.
func (d Descriptor) IsDisabledByDefault() bool { return d.disabledByDefault }

// IsStartFirst reports whether the controller starts before all others.
func (d Descriptor) IsStartFirst() bool { return d.startFirst }

// IsSharded reports whether the controller's work may be shared among
// replicas (Sharded), and how its keys are cut.
func (d Descriptor) IsSharded() (keying shard.Keying, ok bool) { return d.keying, d.sharded }

// NeedsLeaderElection reports whether the controller runs only on the leader.
func (d Descriptor) NeedsLeaderElection() bool { return !d.noLeaderElection }
