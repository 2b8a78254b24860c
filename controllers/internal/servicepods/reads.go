package servicepods

// PodReads are the fields of a pod the Endpoints and EndpointSlice
// controllers read besides its metadata (labels, deletionTimestamp,
// resourceVersion: always kept), for descriptor.WithReads. They read them
// through k8s.io/endpointslice (ShouldPodBeInEndpoints, ShouldSetHostname,
// FindPort, the reconciler's podToEndpoint and getEndpointPorts, the
// trigger-time tracker) and this package's change test
// (GetPodUpdateProjectionKey).
var PodReads = []string{
	// Whether the pod is listed: not terminal, and has an IP (podIP also
	// gives the family of a Service that names none, nor a cluster IP).
	"status.phase",
	"status.podIP",
	// Its addresses; a change of IPs resyncs its Services.
	"status.podIPs",
	// Ready and serving or not, and since when (the
	// last-change-trigger-time annotation); a readiness change resyncs its
	// Services.
	"status.conditions.type",
	"status.conditions.status",
	"status.conditions.lastTransitionTime",
	// The address's node (and through it a slice endpoint's zone), and its
	// hostname when its subdomain is the Service; a hostname or subdomain
	// change resyncs its Services.
	"spec.nodeName",
	"spec.hostname",
	"spec.subdomain",
	// A named targetPort is looked up in the containers' ports, then in
	// the sidecars' (init containers that restart always).
	"spec.containers.ports.name",
	"spec.containers.ports.protocol",
	"spec.containers.ports.containerPort",
	"spec.initContainers.restartPolicy",
	"spec.initContainers.ports.name",
	"spec.initContainers.ports.protocol",
	"spec.initContainers.ports.containerPort",
}
