package csrapproving

import (
	"github.com/spf13/pflag"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "certificatesigningrequest-approving-controller"
	Alias = "csrapproving"
)

// clientName is KCM's name for the client (and ServiceAccount) of its
// three certificate controllers.
const clientName = "certificate-controller"

// The reason and messages of the Approved condition, as KCM writes them.
const (
	Reason          = "AutoApproved"
	SelfNodeMessage = "Auto approving self kubelet client certificate after SubjectAccessReview."
	NodeMessage     = "Auto approving kubelet client certificate after SubjectAccessReview."
)

// Options configures the controller. KCM has no option for it: the zero
// value is KCM's behaviour.
type Options struct{}

// NewOptions returns KCM's defaults.
func NewOptions() Options { return Options{} }

// AddFlags registers nothing: KCM has no flag for this controller. It
// exists so that every built-in controller package has the same shape.
func (o *Options) AddFlags(*pflag.FlagSet) {}
