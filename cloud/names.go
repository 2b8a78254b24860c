package cloud

// The canonical names of the cloud controllers, as cloud-controller-manager
// v1.37 (k8s.io/cloud-provider/names) spells them.
const (
	CloudNodeController          = "cloud-node-controller"
	CloudNodeLifecycleController = "cloud-node-lifecycle-controller"
	ServiceLBController          = "service-lb-controller"
	NodeRouteController          = "node-route-controller"
)

// Aliases maps each canonical name to its upstream alias, accepted in
// --controllers and in leader migration configurations.
var Aliases = map[string]string{
	CloudNodeController:          "cloud-node",
	CloudNodeLifecycleController: "cloud-node-lifecycle",
	ServiceLBController:          "service",
	NodeRouteController:          "route",
}

// clientNames are the names the controllers' clients are built for (their
// user agent, and their service account under
// --use-service-account-credentials), as upstream's: both node controllers
// act as "node-controller", for historical reasons upstream keeps.
var clientNames = map[string]string{
	CloudNodeController:          "node-controller",
	CloudNodeLifecycleController: "node-controller",
	ServiceLBController:          "service-controller",
	NodeRouteController:          "route-controller",
}
