package statefulset

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"sort"
	"strconv"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/util/retry"

	"github.com/ctrlhost/ctrlhost/controllers/internal/podtemplate"
)

// hashLabel is the label a ControllerRevision carries its hash under.
const hashLabel = "controller.kubernetes.io/hash"

// hashRevision is KCM's revision hash: 32-bit FNV-1 over the data, then
// over the decimal collision count if there is one, printed in decimal and
// safe-encoded.
func hashRevision(data []byte, probe *int32) string {
	h := fnv.New32()
	_, _ = h.Write(data)
	if probe != nil {
		_, _ = h.Write([]byte(strconv.FormatInt(int64(*probe), 10)))
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// newRevision is the revision recording set's template, numbered
// revision, labelled with the template's labels and the hash, annotated
// with the set's annotations, controlled by set.
func newRevision(set *appsv1.StatefulSet, revision int64,
	collisionCount *int32) (*appsv1.ControllerRevision, error) {
	data, err := podtemplate.RevisionPatch(set)
	if err != nil {
		return nil, err
	}
	hash := hashRevision(data, collisionCount)
	lbls := maps.Clone(set.Spec.Template.Labels)
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[hashLabel] = hash
	annotations := maps.Clone(set.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            podtemplate.RevisionName(set.Name, hash),
			Namespace:       set.Namespace,
			Labels:          lbls,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, controllerKind)},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: revision,
	}, nil
}

// applyRevision returns a copy of set whose spec is restored from
// revision's patch.
func applyRevision(set *appsv1.StatefulSet,
	revision *appsv1.ControllerRevision) (*appsv1.StatefulSet, error) {
	clone := set.DeepCopy()
	original, err := json.Marshal(clone)
	if err != nil {
		return nil, err
	}
	patched, err := strategicpatch.StrategicMergePatch(original, revision.Data.Raw, clone)
	if err != nil {
		return nil, fmt.Errorf("applying ControllerRevision %s: %w", revision.Name, err)
	}
	restored := &appsv1.StatefulSet{}
	if err := json.Unmarshal(patched, restored); err != nil {
		return nil, fmt.Errorf("applying ControllerRevision %s: %w", revision.Name, err)
	}
	clone.Spec = restored.Spec
	return clone, nil
}

// sortRevisions orders revisions by number, then creation time, then
// name, as KCM does.
func sortRevisions(revs []*appsv1.ControllerRevision) {
	sort.SliceStable(revs, func(i, j int) bool {
		a, b := revs[i], revs[j]
		if a.Revision != b.Revision {
			return a.Revision < b.Revision
		}
		if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.Name < b.Name
		}
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	})
}

func equalRevision(a, b *appsv1.ControllerRevision) bool {
	if a == nil || b == nil {
		return a == b
	}
	return bytes.Equal(a.Data.Raw, b.Data.Raw)
}

// nextRevision is one more than the last of the sorted revs, or 1.
func nextRevision(revs []*appsv1.ControllerRevision) int64 {
	if len(revs) == 0 {
		return 1
	}
	return revs[len(revs)-1].Revision + 1
}

// createRevision creates cr, probing further names while a namesake
// records another template: each raises *collisionCount. A namesake with
// the same data is the one wanted.
func (c *controller) createRevision(ctx context.Context, set *appsv1.StatefulSet,
	cr *appsv1.ControllerRevision, collisionCount *int32) (*appsv1.ControllerRevision, error) {
	clone := cr.DeepCopy()
	for {
		clone.Name = podtemplate.RevisionName(set.Name, hashRevision(cr.Data.Raw, collisionCount))
		revs := c.client.AppsV1().ControllerRevisions(set.Namespace)
		created, err := revs.Create(ctx, clone, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			return created, err
		}
		existing, err := revs.Get(ctx, clone.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if bytes.Equal(existing.Data.Raw, clone.Data.Raw) {
			return existing, nil
		}
		*collisionCount++
	}
}

// renumber sets cr's revision number, retrying conflicts on the cached
// copy.
func (c *controller) renumber(ctx context.Context, cr *appsv1.ControllerRevision,
	revision int64) (*appsv1.ControllerRevision, error) {
	clone := cr.DeepCopy()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if clone.Revision == revision {
			return nil
		}
		clone.Revision = revision
		_, err := c.client.AppsV1().ControllerRevisions(clone.Namespace).Update(ctx, clone,
			metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if fresh, gerr := c.revLister.ControllerRevisions(clone.Namespace).
			Get(clone.Name); gerr == nil {
			clone = fresh.DeepCopy()
		}
		return err
	})
	return clone, err
}

// equalityKey remembers that a set at one generation restores to the
// revision at one resourceVersion.
type equalityKey struct {
	uid        string
	generation int64
	rv         string
}

// equalityCache is a bounded set of equalityKeys; it forgets everything
// when full, which costs only a recomputation.
type equalityCache struct {
	mu sync.Mutex
	m  map[equalityKey]struct{}
}

const maxEqualityEntries = 10000

func (e *equalityCache) has(k equalityKey) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.m[k]
	return ok
}

func (e *equalityCache) add(k equalityKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil || len(e.m) >= maxEqualityEntries {
		e.m = map[equalityKey]struct{}{}
	}
	e.m[k] = struct{}{}
}

// matchesLatest reports, under the semantic-comparison gate, whether
// latest, re-encoded as this controller encodes, records the same template
// as proposed: a revision written by another encoding of the same
// template is kept rather than replaced.
func (c *controller) matchesLatest(set *appsv1.StatefulSet, proposed,
	latest *appsv1.ControllerRevision) bool {
	if !c.semanticRevisions {
		return false
	}
	k := equalityKey{uid: string(set.UID), generation: set.Generation, rv: latest.ResourceVersion}
	if c.equal.has(k) {
		return true
	}
	restored, err := applyRevision(set, latest)
	if err != nil {
		return false
	}
	again, err := newRevision(restored, -1, nil)
	if err != nil || !equalRevision(proposed, again) {
		return false
	}
	c.equal.add(k)
	return true
}

// revisions finds set's current and update revisions, creating the update
// revision, or renumbering an older equal one (a rollback), as needed.
// revs is sorted. It returns the collision count to record.
func (c *controller) revisions(ctx context.Context, set *appsv1.StatefulSet,
	revs []*appsv1.ControllerRevision) (cur, upd *appsv1.ControllerRevision, cc int32, err error) {
	if set.Status.CollisionCount != nil {
		cc = *set.Status.CollisionCount
	}
	upd, err = newRevision(set, nextRevision(revs), &cc)
	if err != nil {
		return nil, nil, cc, err
	}
	var equal []*appsv1.ControllerRevision
	for _, r := range revs {
		if equalRevision(r, upd) {
			equal = append(equal, r)
		}
	}
	n := len(revs)
	switch {
	case len(equal) > 0 && equalRevision(revs[n-1], equal[len(equal)-1]):
		upd = revs[n-1]
	case len(equal) > 0:
		upd, err = c.renumber(ctx, equal[len(equal)-1], upd.Revision)
	case n > 0 && c.matchesLatest(set, upd, revs[n-1]):
		upd = revs[n-1]
	default:
		upd, err = c.createRevision(ctx, set, upd, &cc)
	}
	if err != nil {
		return nil, nil, cc, err
	}
	for _, r := range revs {
		if r.Name == set.Status.CurrentRevision {
			cur = r
			break
		}
	}
	if cur == nil {
		cur = upd
	}
	return cur, upd, cc, nil
}

// truncateHistory deletes, oldest first, the revisions that are neither
// current, update, nor any pod's, beyond spec.revisionHistoryLimit. revs
// is sorted.
func (c *controller) truncateHistory(ctx context.Context, set *appsv1.StatefulSet,
	pods []*corev1.Pod, revs []*appsv1.ControllerRevision,
	cur, upd *appsv1.ControllerRevision) error {
	live := map[string]bool{}
	if cur != nil {
		live[cur.Name] = true
	}
	if upd != nil {
		live[upd.Name] = true
	}
	for _, p := range pods {
		live[podRevision(p)] = true
	}
	var old []*appsv1.ControllerRevision
	for _, r := range revs {
		if !live[r.Name] {
			old = append(old, r)
		}
	}
	limit := 10
	if set.Spec.RevisionHistoryLimit != nil {
		limit = int(*set.Spec.RevisionHistoryLimit)
	}
	if limit < 0 || len(old) <= limit {
		return nil
	}
	for _, r := range old[:len(old)-limit] {
		err := c.client.AppsV1().ControllerRevisions(r.Namespace).Delete(ctx, r.Name,
			metav1.DeleteOptions{})
		if err != nil {
			return err
		}
	}
	return nil
}
