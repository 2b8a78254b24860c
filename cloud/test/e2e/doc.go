// Package e2e moves the cloud controllers from kube-controller-manager to
// cloud-controller-manager and back under leader migration, with two
// replicas of each, on a real API server (testenv), as upstream's
// walkthrough does: the tests are tagged integration.
package e2e
