package deployment

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/podtemplate"
)

// TestTemplateHashMatchesKCM: the want values were computed once with
// KCM's own function, k8s.io/kubernetes@v1.37.1 pkg/controller.ComputeHash,
// over the same templates, by a throwaway program run in the upstream
// module (go run from /work/main/upstream), and are hard-coded here.
func TestTemplateHashMatchesKCM(t *testing.T) {
	web := webTemplate("registry.k8s.io/pause:3.10")
	older := webTemplate("registry.k8s.io/pause:3.9")
	older.Annotations = map[string]string{"b": "2", "a": "1"}
	tests := []struct {
		name      string
		template  corev1.PodTemplateSpec
		collision *int32
		want      string
	}{
		{"empty template", corev1.PodTemplateSpec{}, nil, "54f4c57dcb"},
		{"one container", web, nil, "689fd68df9"},
		{"one container, collisionCount 1", web, ptr.To[int32](1), "7bdc668954"},
		{"annotations (map order) and another image", older, nil, "7f8b9f7578"},
		{"annotations, collisionCount 7", older, ptr.To[int32](7), "585f6dd89c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := podtemplate.Hash(&tt.template, tt.collision); got != tt.want {
				t.Errorf("templateHash = %q, want KCM's %q", got, tt.want)
			}
		})
	}
}

func TestReplicaSetName(t *testing.T) {
	long := strings.Repeat("a", 260)
	tests := []struct {
		deployment, hash, want string
	}{
		{"web", "689fd68df9", "web-689fd68df9"},
		{long, "689fd68df9", strings.Repeat("a", 242) + "-689fd68df9"},
	}
	for _, tt := range tests {
		if got := replicaSetName(tt.deployment, tt.hash); got != tt.want || len(got) > 253 {
			t.Errorf(
				"replicaSetName(%d chars, %s) = %q (%d chars), want %q",
				len(tt.deployment),
				tt.hash,
				got,
				len(got),
				tt.want,
			)
		}
	}
}

// TestFenceposts: surge rounds up, unavailable rounds down, both zero
// makes one pod unavailable.
func TestFenceposts(t *testing.T) {
	tests := []struct {
		replicas              int32
		surge, unavailable    intstr.IntOrString
		wantSurge, wantUnavil int32
	}{
		{10, intstr.FromString("25%"), intstr.FromString("25%"), 3, 2},
		{4, intstr.FromString("25%"), intstr.FromString("25%"), 1, 1},
		{3, intstr.FromInt32(1), intstr.FromInt32(0), 1, 0},
		{3, intstr.FromInt32(0), intstr.FromInt32(1), 0, 1},
		{
			2,
			intstr.FromInt32(0),
			intstr.FromString("40%"),
			0,
			1,
		}, // 0.8 rounds to 0: both zero
		{
			1,
			intstr.FromString("10%"),
			intstr.FromString("10%"),
			1,
			0,
		}, // 0.1 rounds up to 1, down to 0
		{5, intstr.FromString("0%"), intstr.FromString("0%"), 0, 1},     // both zero
		{7, intstr.FromString("100%"), intstr.FromString("100%"), 7, 7}, // whole
		{
			3,
			intstr.FromInt32(5),
			intstr.FromInt32(2),
			5,
			2,
		}, // ints are not capped here
		{
			0,
			intstr.FromString("25%"),
			intstr.FromString("25%"),
			0,
			1,
		}, // nothing to scale: both zero
		{100, intstr.FromString("33%"), intstr.FromString("33%"), 33, 33}, // exact
	}
	for _, tt := range tests {
		t.Run(
			fmt.Sprintf("%d/%s/%s", tt.replicas, tt.surge.String(), tt.unavailable.String()),
			func(t *testing.T) {
				s, u, err := fenceposts(&tt.surge, &tt.unavailable, tt.replicas)
				if err != nil || s != tt.wantSurge || u != tt.wantUnavil {
					t.Errorf(
						"fenceposts = %d, %d, %v; want %d, %d",
						s,
						u,
						err,
						tt.wantSurge,
						tt.wantUnavil,
					)
				}
			},
		)
	}
	// maxUnavailable never exceeds spec.replicas, and Recreate has neither.
	d := rolling(3, intstr.FromInt32(0), intstr.FromInt32(5))
	if got := maxUnavailable(d); got != 3 {
		t.Errorf("maxUnavailable = %d, want 3 (capped)", got)
	}
	if r := recreate(3); maxSurge(r) != 0 || maxUnavailable(r) != 0 {
		t.Error("Recreate has a surge or unavailability")
	}
}

// TestProportionalScaling: a resize in the middle of a rollout spreads the
// difference in proportion to the ReplicaSets' sizes, relative to the
// max-replicas they were sized for; the rounding leftover goes to the
// largest (newest among equals when growing, oldest when shrinking).
func TestProportionalScaling(t *testing.T) {
	rs := func(name string, size int32, age int, maxAnnotation string) *appsv1.ReplicaSet {
		r := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{
				Name:              name,
				CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(age) * time.Second)),
			},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(size)},
		}
		if maxAnnotation != "" {
			r.Annotations = map[string]string{annotationMaxReplicas: maxAnnotation}
		}
		return r
	}
	tests := []struct {
		name           string
		replicas       int32
		surge, unavail intstr.IntOrString
		statusReplicas int32
		rss            []*appsv1.ReplicaSet
		want           string // name=size in the order they are written
	}{
		{"grow 10 to 15, surge 3", 15, intstr.FromInt32(3), intstr.FromInt32(0), 13,
			[]*appsv1.ReplicaSet{rs("old", 8, 0, "13"), rs("new", 5, 1, "13")}, "old=11 new=7"},
		{"shrink 10 to 5, surge 3", 5, intstr.FromInt32(3), intstr.FromInt32(0), 13,
			[]*appsv1.ReplicaSet{rs("old", 8, 0, "13"), rs("new", 5, 1, "13")}, "old=5 new=3"},
		{"to zero", 0, intstr.FromInt32(3), intstr.FromInt32(0), 13,
			[]*appsv1.ReplicaSet{rs("old", 8, 0, "13"), rs("new", 5, 1, "13")}, "old=0 new=0"},
		{
			"equal sizes growing: the newest takes the leftover",
			10,
			intstr.FromInt32(0),
			intstr.FromInt32(1),
			9,
			[]*appsv1.ReplicaSet{
				rs("a", 3, 0, "9"),
				rs("b", 3, 1, "9"),
				rs("c", 3, 2, "9"),
			},
			"c=4 b=3 a=3",
		},
		{
			"equal sizes shrinking: the oldest gives the leftover",
			8,
			intstr.FromInt32(0),
			intstr.FromInt32(1),
			9,
			[]*appsv1.ReplicaSet{
				rs("a", 3, 0, "9"),
				rs("b", 3, 1, "9"),
				rs("c", 3, 2, "9"),
			},
			"a=2 b=3 c=3",
		},
		{
			"no annotation: status.replicas is the base",
			20,
			intstr.FromInt32(0),
			intstr.FromInt32(1),
			10,
			[]*appsv1.ReplicaSet{rs("old", 6, 0, ""), rs("new", 4, 1, "")},
			"old=12 new=8",
		},
		{
			"percent surge recomputed for the new size",
			20,
			intstr.FromString("10%"),
			intstr.FromInt32(0),
			11,
			[]*appsv1.ReplicaSet{rs("old", 6, 0, "11"), rs("new", 5, 1, "11")},
			"old=12 new=10",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := rolling(tt.replicas, tt.surge, tt.unavail)
			d.Status.Replicas = tt.statusReplicas
			var got []string
			for _, s := range proportionalSizes(d, tt.rss) {
				got = append(got, fmt.Sprintf("%s=%d", s.rs.Name, s.size))
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("sizes %q, want %q", strings.Join(got, " "), tt.want)
			}
		})
	}
}

func TestAnnotationsCopiedAsKCMFilters(t *testing.T) {
	d := rolling(3, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Annotations = map[string]string{
		"team":                             "a",
		corev1.LastAppliedConfigAnnotation: "{}",
		annotationRevision:                 "9",
		annotationRevisionHistory:          "1,2",
		annotationDesiredReplicas:          "9",
		annotationMaxReplicas:              "9",
		appsv1.DeprecatedRollbackTo:        "1",
	}
	rs := &appsv1.ReplicaSet{}
	if !setNewRSAnnotations(d, rs, 4, false) {
		t.Fatal("annotations reported unchanged")
	}
	want := map[string]string{
		"team":                    "a",
		annotationRevision:        "4",
		annotationDesiredReplicas: "3",
		annotationMaxReplicas:     "4",
	}
	if fmt.Sprint(rs.Annotations) != fmt.Sprint(want) {
		t.Errorf("annotations %v, want %v", rs.Annotations, want)
	}
	// An existing ReplicaSet that becomes the new one again keeps its old
	// revision in the history, and its replica annotations are left to
	// scaling.
	rs.Annotations[annotationDesiredReplicas] = "1"
	if !setNewRSAnnotations(d, rs, 7, true) {
		t.Fatal("a raised revision reported unchanged")
	}
	if rs.Annotations[annotationRevision] != "7" ||
		rs.Annotations[annotationRevisionHistory] != "4" ||
		rs.Annotations[annotationDesiredReplicas] != "1" {
		t.Errorf("annotations %v", rs.Annotations)
	}
	setNewRSAnnotations(d, rs, 9, true)
	if rs.Annotations[annotationRevisionHistory] != "4,7" {
		t.Errorf("history %q, want 4,7", rs.Annotations[annotationRevisionHistory])
	}
	// Never lowered.
	if setNewRSAnnotations(d, rs, 2, true) || rs.Annotations[annotationRevision] != "9" {
		t.Errorf("revision lowered: %v", rs.Annotations)
	}
}
