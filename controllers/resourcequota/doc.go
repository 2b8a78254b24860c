// Package resourcequota is kube-controller-manager's resource-quota
// controller as a ctrlhost descriptor: canonical name
// resourcequota-controller, alias resourcequota, enabled by "*", flags
// --concurrent-resource-quota-syncs (5) and --resource-quota-sync-period
// (5m).
//
// It keeps every ResourceQuota's status: status.hard becomes spec.hard and
// status.used the usage, in the quota's namespace, of exactly the
// resources spec.hard limits, within the quota's scopes. Usage is measured
// from informer caches by evaluators:
//
//   - pods: count/pods (every pod), and for pods that are neither
//     Succeeded nor Failed nor past their deletion grace period: pods,
//     cpu and memory (= requests), requests.* and limits.* of cpu, memory
//     and ephemeral-storage, hugepages, and requests.<extended resource>.
//     A pod's requests and limits are its containers' sum raised to the
//     largest init-time need (sidecars counted throughout), the larger of
//     spec and kubelet-reported (in-place resize) values, pod-level
//     resources overriding (gate PodLevelResources), plus the pod overhead.
//   - services: services, count/services, services.loadbalancers,
//     services.nodeports.
//   - persistentvolumeclaims: persistentvolumeclaims, count/..,
//     requests.storage, and per storage class
//     <class>.storageclass.storage.k8s.io/{requests.storage,persistentvolumeclaims}.
//   - resourceclaims.resource.k8s.io (DRA): count/resourceclaims.resource.k8s.io
//     and, per device class, <class>.deviceclass.resource.k8s.io/devices
//     (a request with alternatives counts its largest per class).
//   - configmaps, secrets, replicationcontrollers, resourcequotas under
//     their legacy names and count/<resource>; every other namespaced
//     resource discovery lists as creatable, listable, watchable and
//     deletable as count/<resource>.<group>.
//
// Scopes: Terminating, NotTerminating, BestEffort, NotBestEffort,
// PriorityClass (scopeSelector In, NotIn, Exists, DoesNotExist),
// CrossNamespacePodAffinity for pods, VolumeAttributesClass for claims;
// object counts under any scope count nothing (as in KCM).
//
// Two queues, as in KCM: quotas whose status lacks a usage (new quotas,
// changed limits) go to a priority queue; recalculations go to the
// primary one. Every quota is recalculated every sync period; deleting an
// object, a pod turning terminal or Terminating, a pod's resized
// resources, a service changing type, and any claim update queue the
// quotas of its namespace that limit that resource. Discovery runs again
// every 30 s and new resources are monitored.
//
// Guarantees:
//   - The status is written only when status.hard or status.used
//     changed; usage a quota has for resources no evaluator measures is
//     kept, and status.used holds exactly the resources of spec.hard.
//   - A resource whose usage could not be measured (cache not synced) is
//     not written from a partial count: its former value stays, and the
//     quota is retried with back-off.
//   - No quota is recalculated while the monitored resources change.
//   - A deletion or charge change queues every quota of its namespace
//     whose spec or status limits that resource, so one seen before the
//     informer delivers the controller's own status write is not lost.
//   - A partial discovery failure keeps the resources of the groups that
//     failed (as in KCM).
//   - Informer objects are never modified; Run returns after every
//     goroutine it started has ended.
//
// Non-guarantees:
//   - Objects created while the controller runs are not recounted at once
//     (the API server's quota admission charges them); they are at the
//     next full resync, as in KCM.
//   - The quota is only as current as the caches it is measured from.
//
// Differences from KCM:
//   - Replenishment matches a quota's spec.hard as well as its status.hard
//     (KCM: status.hard only, so a deletion that races a quota's first
//     status write waits for the full resync).
//   - Monitors of resources that disappear from discovery are removed as
//     event handlers; their shared informers run until the term ends (KCM
//     runs a private controller per monitor and stops it).
//   - DRA extended resources (DRAExtendedResource) are measured from pods
//     only: the claims' share of requests.deviceclass.resource.kubernetes.io/<class>
//     and of requests.<extended resource> backed by a device class (which
//     needs KCM's device-class cache and pod ownership of claims) is not
//     added; those names keep what the API server's admission wrote.
//   - In-place pod-level resize (InPlacePodLevelResourcesVerticalScaling,
//     alpha, off by default) is not honoured; KCM's quota evaluator does
//     not enable it either.
//   - With a host that offers no ObjectOrMetadataInformerFactory, only
//     resources client-go has types for are monitored.
//   - No metrics beyond the kit's work-queue metrics (queue names as KCM's:
//     resourcequota_primary, resourcequota_priority).
package resourcequota
