package ownership

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var rsKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

func owner(mod ...func(*appsv1.ReplicaSet)) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "rs-uid"},
	}
	for _, m := range mod {
		m(rs)
	}
	return rs
}

func ref(kind, name string, uid types.UID, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: "apps/v1",
		Kind:       kind,
		Name:       name,
		UID:        uid,
		Controller: &controller,
	}
}

func pod(name string, lbls map[string]string, mod ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns",
			Name:      name,
			UID:       types.UID(name + "-uid"),
			Labels:    lbls,
		},
	}
	for _, m := range mod {
		m(p)
	}
	return p
}

func ownedBy(r metav1.OwnerReference) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.OwnerReferences = append(p.OwnerReferences, r) }
}

var (
	match   = map[string]string{"app": "web"}
	nomatch = map[string]string{"app": "other"}
	ours    = ref("ReplicaSet", "web", "rs-uid", true)
	theirs  = ref("ReplicaSet", "other", "other-uid", true)
)

func TestClaim(t *testing.T) {
	deleting := metav1.Now()
	tests := []struct {
		name        string
		owner       *appsv1.ReplicaSet
		fresh       *appsv1.ReplicaSet // what Recheck answers; nil: the owner
		freshErr    error
		pods        []*corev1.Pod
		missing     []string // pods not in the API server (vanished)
		filter      func(*corev1.Pod) bool
		wantClaimed []string
		wantOwned   []string // pods controlled by the owner afterwards, per the API server
		wantPatches int
		wantRecheck int
		wantErr     string
	}{
		{
			name:  "matching orphan adopted after recheck",
			owner: owner(),
			pods:  []*corev1.Pod{pod("a", match), pod("b", match)},
			wantClaimed: []string{
				"a",
				"b",
			}, wantOwned: []string{"a", "b"}, wantPatches: 2, wantRecheck: 1,
		},
		{
			name:  "non-matching orphan ignored",
			owner: owner(),
			pods:  []*corev1.Pod{pod("a", nomatch)},
		},
		{
			name:        "owned and matching claimed without patch",
			owner:       owner(),
			pods:        []*corev1.Pod{pod("a", match, ownedBy(ours))},
			wantClaimed: []string{"a"}, wantOwned: []string{"a"},
		},
		{
			name:  "owned but no longer matching released",
			owner: owner(),
			pods: []*corev1.Pod{
				pod("a", nomatch, ownedBy(ours)),
				pod("b", match, ownedBy(ours)),
			},
			wantClaimed: []string{"b"}, wantOwned: []string{"b"}, wantPatches: 1,
		},
		{
			name:  "owned by another controller ignored",
			owner: owner(),
			pods:  []*corev1.Pod{pod("a", match, ownedBy(theirs))},
		},
		{
			name:  "terminating orphan ignored",
			owner: owner(),
			pods: []*corev1.Pod{
				pod("a", match, func(p *corev1.Pod) { p.DeletionTimestamp = &deleting }),
			},
		},
		{
			name:  "orphan in another namespace ignored",
			owner: owner(),
			pods: []*corev1.Pod{
				pod("a", match, func(p *corev1.Pod) { p.Namespace = "elsewhere" }),
			},
		},
		{
			name:  "owner being deleted (cache): no adoption, no release",
			owner: owner(func(rs *appsv1.ReplicaSet) { rs.DeletionTimestamp = &deleting }),
			pods: []*corev1.Pod{
				pod("a", match),
				pod("b", nomatch, ownedBy(ours)),
				pod("c", match, ownedBy(ours)),
			},
			// b keeps its reference; c is still claimed
			wantClaimed: []string{"c"}, wantOwned: []string{"b", "c"},
		},
		{
			name:        "owner being deleted (recheck): no adoption",
			owner:       owner(),
			fresh:       owner(func(rs *appsv1.ReplicaSet) { rs.DeletionTimestamp = &deleting }),
			pods:        []*corev1.Pod{pod("a", match), pod("b", match)},
			wantRecheck: 1, wantErr: "is being deleted",
		},
		{
			name:        "owner recreated (recheck UID differs): no adoption",
			owner:       owner(),
			fresh:       owner(func(rs *appsv1.ReplicaSet) { rs.UID = "new-uid" }),
			pods:        []*corev1.Pod{pod("a", match)},
			wantRecheck: 1, wantErr: "is gone",
		},
		{
			name:        "recheck fails: no adoption",
			owner:       owner(),
			freshErr:    errors.New("apiserver down"),
			pods:        []*corev1.Pod{pod("a", match)},
			wantRecheck: 1, wantErr: "apiserver down",
		},
		{
			name:        "vanished orphan skipped silently",
			owner:       owner(),
			pods:        []*corev1.Pod{pod("a", match), pod("b", match)},
			missing:     []string{"a"},
			wantClaimed: []string{"b"}, wantOwned: []string{"b"}, wantPatches: 2, wantRecheck: 1,
		},
		{
			name:  "malformed ownerReferences reported, others still claimed",
			owner: owner(),
			pods: []*corev1.Pod{
				pod("a", match, ownedBy(ref("ReplicaSet", "x", "", false))),
				pod("b", match, ownedBy(ours), ownedBy(theirs)),
				pod("c", match),
			},
			// b is left as it was (its first controller reference is ours)
			wantClaimed: []string{
				"c",
			}, wantOwned: []string{"b", "c"}, wantPatches: 1, wantRecheck: 1,
			wantErr: "malformed ownerReferences",
		},
		{
			name:        "filter excludes a pod from adoption",
			owner:       owner(),
			pods:        []*corev1.Pod{pod("a", match), pod("b", match)},
			filter:      func(p *corev1.Pod) bool { return p.Name != "a" },
			wantClaimed: []string{"b"}, wantOwned: []string{"b"}, wantPatches: 1, wantRecheck: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []runtime.Object
			for _, p := range tt.pods {
				if !slices.Contains(tt.missing, p.Name) {
					objs = append(objs, p.DeepCopy())
				}
			}
			cs := fake.NewClientset(objs...)
			patches, rechecks := 0, 0
			m, err := New[*corev1.Pod](Config{
				Owner:     tt.owner,
				OwnerKind: rsKind,
				Selector:  labels.SelectorFromSet(match),
				Patch: func(ctx context.Context, ns, name string, data []byte) error {
					patches++
					_, err := cs.CoreV1().
						Pods(ns).
						Patch(ctx, name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
					return err
				},
				Recheck: func(context.Context) (metav1.Object, error) {
					rechecks++
					if tt.freshErr != nil {
						return nil, tt.freshErr
					}
					if tt.fresh != nil {
						return tt.fresh, nil
					}
					return tt.owner, nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			var filters []func(*corev1.Pod) bool
			if tt.filter != nil {
				filters = append(filters, tt.filter)
			}
			claimed, err := m.Claim(t.Context(), tt.pods, filters...)
			if tt.wantErr == "" && err != nil ||
				tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("Claim error = %v, want one containing %q", err, tt.wantErr)
			}
			var names []string
			for _, p := range claimed {
				names = append(names, p.Name)
			}
			if !slices.Equal(names, tt.wantClaimed) {
				t.Errorf("claimed %v, want %v", names, tt.wantClaimed)
			}
			if patches != tt.wantPatches || rechecks != tt.wantRecheck {
				t.Errorf(
					"patches %d, rechecks %d; want %d, %d",
					patches,
					rechecks,
					tt.wantPatches,
					tt.wantRecheck,
				)
			}
			list, err := cs.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var owned []string
			for _, p := range list.Items {
				if metav1.IsControlledBy(&p, tt.owner) {
					owned = append(owned, p.Name)
				}
			}
			slices.Sort(owned)
			if !slices.Equal(owned, tt.wantOwned) {
				t.Errorf("controlled by the owner afterwards: %v, want %v", owned, tt.wantOwned)
			}
		})
	}
}

func TestAdoptedRefIsComplete(t *testing.T) {
	cs := fake.NewClientset(pod("a", match))
	o := owner()
	m, err := New[*corev1.Pod](Config{
		Owner: o, OwnerKind: rsKind, Selector: labels.SelectorFromSet(match),
		Patch: func(ctx context.Context, ns, name string, data []byte) error {
			_, err := cs.CoreV1().
				Pods(ns).
				Patch(ctx, name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
			return err
		},
		Recheck: func(context.Context) (metav1.Object, error) { return o, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Claim(t.Context(), []*corev1.Pod{pod("a", match)}); err != nil {
		t.Fatal(err)
	}
	got, err := cs.CoreV1().Pods("ns").Get(t.Context(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := metav1.GetControllerOf(got)
	if r == nil || r.APIVersion != "apps/v1" || r.Kind != "ReplicaSet" || r.Name != "web" ||
		r.UID != "rs-uid" ||
		r.BlockOwnerDeletion == nil ||
		!*r.BlockOwnerDeletion {
		t.Errorf("controller reference after adoption: %+v", r)
	}
}

func TestNewValidates(t *testing.T) {
	_, err := New[*corev1.Pod](Config{Owner: &appsv1.ReplicaSet{}})
	if err == nil {
		t.Fatal("New accepted an empty config")
	}
	for _, want := range []string{"Owner must have", "OwnerKind", "Selector", "Patch", "Recheck"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestInvalidRefsErrorType(t *testing.T) {
	err := ValidateOwnerRefs(pod("a", match, ownedBy(ours), ownedBy(theirs)))
	var ire *InvalidRefsError
	if !errors.As(err, &ire) || ire.Name != "a" {
		t.Fatalf("ValidateOwnerRefs = %v, want an *InvalidRefsError for a", err)
	}
	if err := ValidateOwnerRefs(pod("b", match, ownedBy(ours), ownedBy(ref("X", "y", "z", false)))); err != nil {
		t.Errorf("valid references rejected: %v", err)
	}
}

// TestOwner: the owner a reference names is found only with its kind and
// UID; a recreated namesake or a missing one is not it.
func TestOwner(t *testing.T) {
	cached := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "now"}}
	get := func(name string) (*appsv1.ReplicaSet, error) {
		if name != cached.Name {
			return nil, errors.New("not found")
		}
		return cached, nil
	}
	ref := func(kind, name string, uid types.UID) metav1.OwnerReference {
		return metav1.OwnerReference{Kind: kind, Name: name, UID: uid}
	}
	for _, tc := range []struct {
		name string
		ref  metav1.OwnerReference
		want bool
	}{
		{"same kind, name and UID", ref("ReplicaSet", "web", "now"), true},
		{"a recreated namesake", ref("ReplicaSet", "web", "before"), false},
		{"another kind", ref("Deployment", "web", "now"), false},
		{"not cached", ref("ReplicaSet", "db", "now"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Owner(&tc.ref, "ReplicaSet", get)
			if ok != tc.want || (ok && got != cached) || (!ok && got != nil) {
				t.Errorf("Owner = %v, %v; want found=%v", got, ok, tc.want)
			}
		})
	}
}

// TestSelecting: owners whose selector matches the labels, in their
// order; no labels, an empty or an invalid selector match nothing.
func TestSelecting(t *testing.T) {
	sel := func(m map[string]string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: m}
	}
	invalid := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "app", Operator: "Bogus"}}}
	owners := []*metav1.LabelSelector{sel(map[string]string{"app": "web"}), sel(nil), invalid,
		sel(map[string]string{"app": "web", "tier": "front"}), sel(map[string]string{"app": "db"})}
	id := func(s *metav1.LabelSelector) *metav1.LabelSelector { return s }
	for _, tc := range []struct {
		name string
		lbls map[string]string
		want []int
	}{
		{"one label", map[string]string{"app": "web"}, []int{0}},
		{"two labels", map[string]string{"app": "web", "tier": "front"}, []int{0, 3}},
		{"no labels", nil, nil},
		{"no match", map[string]string{"app": "cache"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []*metav1.LabelSelector
			for _, i := range tc.want {
				want = append(want, owners[i])
			}
			if got := Selecting(owners, id, tc.lbls); !slices.Equal(got, want) {
				t.Errorf("Selecting(%v) = %v, want %v", tc.lbls, got, want)
			}
		})
	}
}
