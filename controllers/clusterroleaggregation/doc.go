// Package clusterroleaggregation is kube-controller-manager's
// clusterrole-aggregation controller, native: a ClusterRole with an
// aggregationRule gets, as its rules, the rules of every other ClusterRole
// its selectors match.
//
// Guarantees, as KCM v1.37 does it:
//   - names: clusterrole-aggregation-controller, alias
//     clusterrole-aggregation; five workers; no flag (KCM has none);
//   - any change to any ClusterRole (add, update, delete) queues every
//     ClusterRole that has an aggregationRule: the set of roles is small
//     and which role feeds which is not indexed;
//   - a role's rules are those of the matching roles, each selector in
//     turn, roles in name order, the role itself left out, a rule already
//     taken (semantically equal) not taken again; only resources,
//     resourceNames, apiGroups, nonResourceURLs and verbs are carried;
//   - when they differ from the role's rules (nil and empty alike), they
//     are written with server-side apply, field manager
//     "clusterrole-aggregation-controller", forced: an aggregated role's
//     rules belong to the controller;
//   - a role with no aggregationRule, or gone, is left alone; nothing is
//     written otherwise; no event is recorded.
//
// Differences from KCM:
//   - a sync that keeps failing is retried with back-off up to the kit's
//     MaxRetries, then dropped until the next ClusterRole change (KCM
//     retries it without end); an invalid selector cannot succeed until the
//     role changes, which queues it again;
//   - not sharded: roles are cluster-scoped and one role's rules come from
//     any other role, so no key space splits them.
//
// Non-guarantees: a rule removed from a matched role by hand is written
// back at the next change of any ClusterRole, not at once.
package clusterroleaggregation
