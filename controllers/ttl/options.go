package ttl

import (
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "ttl-controller"
	Alias = "ttl"
)

// Annotation is the node annotation the controller keeps: how many
// seconds a kubelet may cache the Secrets and ConfigMaps its pods use
// before fetching them again (corev1.ObjectTTLAnnotationKey).
const Annotation = corev1.ObjectTTLAnnotationKey

// clientName is KCM's name for the controller's client and ServiceAccount.
const clientName = "ttl-controller"

var nodes = corev1.SchemeGroupVersion.WithResource("nodes")

// Options configures the controller. KCM has no option for it (its worker
// count is fixed): the zero value is KCM's behaviour.
type Options struct{}

// NewOptions returns KCM's defaults.
func NewOptions() Options { return Options{} }

// AddFlags registers nothing: KCM has no flag for this controller. It
// exists so that every built-in controller package has the same shape.
func (o *Options) AddFlags(*pflag.FlagSet) {}
