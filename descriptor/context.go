package descriptor

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	kinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/informers"
	"github.com/ctrlhost/ctrlhost/shard"
)

// Context is what an InitFunc receives: everything a controller needs from
// its host for one term. The logger travels in the context.Context passed
// beside it (logr.FromContextOrDiscard), named after the controller.
type Context struct {
	// Name is the controller's canonical name.
	Name string
	// ClientBuilder hands out clients whose user agent names the controller.
	// With --use-service-account-credentials they authenticate as the
	// controller's own ServiceAccount.
	ClientBuilder ClientBuilder
	// RootClientBuilder hands out clients with the host's own credentials,
	// whatever --use-service-account-credentials says, fenced like
	// ClientBuilder's. KCM uses such clients for machinery shared by
	// controllers (informers, the garbage collector's graph) and for the
	// service-account token controller, which mints the tokens the others'
	// credentials need. A controller acting on its own behalf uses
	// ClientBuilder.
	RootClientBuilder ClientBuilder
	// InformerFactory is the term's typed shared informer factory.
	InformerFactory kinformers.SharedInformerFactory
	// NamespacedInformerFactory returns the term's typed shared informer
	// factory restricted to one namespace ("" gives InformerFactory), for a
	// controller that watches one namespace and should need RBAC, and cache
	// objects, only there. Calls with the same namespace return the same
	// factory; it is started with InformerFactory, gates InformersStarted
	// and readiness the same way, and is shut down with the term. Nil when
	// the host does not offer it (check before calling).
	NamespacedInformerFactory func(namespace string) kinformers.SharedInformerFactory
	// MetadataInformerFactory is the term's metadata-only factory.
	MetadataInformerFactory metadatainformer.SharedInformerFactory
	// ObjectOrMetadataInformerFactory answers typed informers where client-go
	// has them and metadata informers otherwise.
	ObjectOrMetadataInformerFactory informers.ObjectOrMetadataFactory
	// DynamicInformerFactory is the term's dynamic informer factory: an
	// informer of any resource, custom ones included, caching
	// *unstructured.Unstructured. Nil when the host has no dynamic client
	// (a Manager built WithClient without WithDynamicClient).
	DynamicInformerFactory dynamicinformer.DynamicSharedInformerFactory
	// Informers is the term's informer set, of which the factories above
	// are parts: informers.Custom[T](cc.Informers, gvr) gives a typed
	// informer of a custom resource without generated code, and
	// cc.Informers.AddFactory adds a generated clientset's informer factory
	// to the term (started, waited for and shut down with it). It is the
	// set as this controller sees it (informers.Set.For): what it requests
	// through it or the factories above is counted as its own, and
	// released when it stops; an informer no other controller holds is
	// then stopped and its cache freed.
	Informers *informers.Set
	// Queues lets the controllers of one term hand each other keys: one
	// controller's events can make another resync an object (an operator's
	// Secret controller requeueing the custom resources that use a Secret).
	Queues Queues
	// Metrics is the registry the host serves on /metrics, for the
	// controller's own metrics. It lives as long as the host, longer than a
	// term: register a collector once (a package-level sync.Once), or treat
	// prometheus.AlreadyRegisteredError as success, or the next term fails.
	Metrics prometheus.Registerer
	// InformersStarted is closed once every InitFunc of the term has returned
	// and the informers have been started. Run is called after it closed,
	// except on a warm standby takeover, where each Run is called as soon as
	// its InitFunc returned (the declared informers are running already): a
	// controller that needs every informer of the term started waits for it.
	InformersStarted <-chan struct{}
	// ResyncPeriod returns a fresh jittered period in [min, 2·min) where min
	// is --min-resync-period, for controllers that build their own informers.
	ResyncPeriod func() time.Duration
	// FeatureGate is the host's feature gate (never nil).
	FeatureGate featuregate.FeatureGate
	// RESTMapper is a discovery-backed mapper; the host resets it
	// periodically so that new API groups are found.
	RESTMapper meta.ResettableRESTMapper
	// EventRecorder records events whose source component is the
	// controller's Descriptor.EventSource (its name unless declared).
	EventRecorder record.EventRecorder
	// Shard is, for a sharded controller (Descriptor.Sharded) that the
	// host shards, the part of the key space this instance works: its
	// informers hold only these slots' objects. Nil otherwise.
	Shard *shard.Scope
}

// Queues routes keys between the controllers of one term.
type Queues interface {
	// Handle routes the keys other controllers Send to this one to add,
	// usually its work queue's Add (workloop.Loop.Add). Call it once, from
	// the InitFunc, before the controller runs; keys sent earlier are
	// handed over then.
	Handle(add func(key string))
	// Send gives key to the named controller (canonical name or alias) of
	// the same term. Keys sent before it called Handle are held for it (up
	// to 10,000; beyond, the oldest are dropped). An error names the
	// controllers Send can reach when name is not one of them.
	Send(controller, key string) error
}

// ClientBuilder hands out API clients for one controller.
type ClientBuilder interface {
	// Config returns a copy of the REST config for the named controller, its
	// user agent ending in "/<name>". It fails when the host was built over
	// ready-made clients (for example fake clientsets) and has no config.
	Config(name string) (*rest.Config, error)
	// Client returns a typed clientset for the named controller.
	Client(name string) (kubernetes.Interface, error)
	// MetadataClient returns a metadata-only client for the named controller.
	MetadataClient(name string) (metadata.Interface, error)
	// DynamicClient returns a dynamic (unstructured) client for the named
	// controller, for custom resources and any other resource.
	DynamicClient(name string) (dynamic.Interface, error)
}
