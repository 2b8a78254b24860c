package garbagecollector

import (
	"fmt"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// objectRef names one object of the graph: the coordinates an owner
// reference carries (apiVersion, kind, name, uid) plus the namespace.
type objectRef struct {
	APIVersion string
	Kind       string
	Name       string
	UID        types.UID
	Namespace  string
}

func (r objectRef) String() string {
	return fmt.Sprintf(
		"[%s/%s, namespace: %s, name: %s, uid: %s]",
		r.APIVersion,
		r.Kind,
		r.Namespace,
		r.Name,
		r.UID,
	)
}

// refFromOwner is the identity an owner reference points at, assumed to be
// in namespace ns.
func refFromOwner(o metav1.OwnerReference, ns string) objectRef {
	return objectRef{
		APIVersion: o.APIVersion,
		Kind:       o.Kind,
		Name:       o.Name,
		UID:        o.UID,
		Namespace:  ns,
	}
}

// sameCoordinates reports whether the owner reference o names r's
// apiVersion, kind, name and uid.
func sameCoordinates(o metav1.OwnerReference, r objectRef) bool {
	return o.UID == r.UID && o.Name == r.Name && o.Kind == r.Kind && o.APIVersion == r.APIVersion
}

func blocking(o metav1.OwnerReference) bool {
	return o.BlockOwnerDeletion != nil && *o.BlockOwnerDeletion
}

// node is one object in the dependency graph. A virtual node stands for an
// owner that some dependent references but no informer has shown; it is
// verified (and removed when absent) by the attempt-to-delete worker.
type node struct {
	mu                 sync.RWMutex
	id                 objectRef
	dependents         map[*node]struct{}
	owners             []metav1.OwnerReference
	virtual            bool
	beingDeleted       bool
	deletingDependents bool
}

func newNode(id objectRef) *node {
	return &node{id: id, dependents: map[*node]struct{}{}}
}

// clone copies n under a new pointer (dependents shared by value).
func (n *node) clone() *node {
	n.mu.RLock()
	defer n.mu.RUnlock()
	c := &node{
		id: n.id, dependents: make(map[*node]struct{}, len(n.dependents)),
		owners: slices.Clone(n.owners), virtual: n.virtual,
		beingDeleted: n.beingDeleted, deletingDependents: n.deletingDependents,
	}
	for d := range n.dependents {
		c.dependents[d] = struct{}{}
	}
	return c
}

func (n *node) identity() objectRef {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.id
}

func (n *node) setIdentity(id objectRef) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.id = id
}

func (n *node) observed() bool {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return !n.virtual
}

func (n *node) markObserved() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.virtual = false
}

func (n *node) isBeingDeleted() bool {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.beingDeleted
}

func (n *node) markBeingDeleted() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.beingDeleted = true
}

func (n *node) isDeletingDependents() bool {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.deletingDependents
}

func (n *node) markDeletingDependents() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.deletingDependents = true
}

func (n *node) ownerRefs() []metav1.OwnerReference {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.owners
}

func (n *node) setOwners(o []metav1.OwnerReference) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.owners = o
}

func (n *node) addDependent(d *node) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dependents[d] = struct{}{}
}

func (n *node) removeDependent(d *node) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.dependents, d)
}

func (n *node) dependentList() []*node {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := make([]*node, 0, len(n.dependents))
	for d := range n.dependents {
		out = append(out, d)
	}
	return out
}

func (n *node) dependentCount() int {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return len(n.dependents)
}

// blockingDependents are the dependents whose reference to n has
// blockOwnerDeletion set.
func (n *node) blockingDependents() []*node {
	uid := n.identity().UID
	var out []*node
	for _, d := range n.dependentList() {
		for _, o := range d.ownerRefs() {
			if o.UID == uid && blocking(o) {
				out = append(out, d)
			}
		}
	}
	return out
}

// uidIndex is the graph: every node by uid.
type uidIndex struct {
	mu    sync.RWMutex
	nodes map[types.UID]*node
}

func newUIDIndex() *uidIndex { return &uidIndex{nodes: map[types.UID]*node{}} }

func (m *uidIndex) get(uid types.UID) (*node, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, ok := m.nodes[uid]
	return n, ok
}

func (m *uidIndex) put(n *node) {
	uid := n.identity().UID
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nodes[uid] = n
}

func (m *uidIndex) remove(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.nodes, uid)
}

// snapshot returns the nodes under the index's read lock.
func (m *uidIndex) snapshot() map[types.UID]*node {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[types.UID]*node, len(m.nodes))
	for k, v := range m.nodes {
		out[k] = v
	}
	return out
}
