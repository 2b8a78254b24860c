package namespace

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// conditionTypes are the namespace conditions this controller owns, in
// the order it adds them.
var conditionTypes = []corev1.NamespaceConditionType{
	corev1.NamespaceDeletionDiscoveryFailure,
	corev1.NamespaceDeletionGVParsingFailure,
	corev1.NamespaceDeletionContentFailure,
	corev1.NamespaceContentRemaining,
	corev1.NamespaceFinalizersRemaining,
}

// okConditions are the reason and message of each condition when nothing
// went wrong (status False), KCM's words.
var okConditions = map[corev1.NamespaceConditionType]struct{ reason, message string }{
	corev1.NamespaceDeletionDiscoveryFailure: {
		"ResourcesDiscovered",
		"All resources successfully discovered",
	},
	corev1.NamespaceDeletionGVParsingFailure: {
		"ParsedGroupVersions",
		"All legacy kube types successfully parsed",
	},
	corev1.NamespaceDeletionContentFailure: {
		"ContentDeleted",
		"All content successfully deleted, may be waiting on finalization",
	},
	corev1.NamespaceContentRemaining: {
		"ContentRemoved",
		"All content successfully removed",
	},
	corev1.NamespaceFinalizersRemaining: {
		"ContentHasNoFinalizers",
		"All content-preserving finalizers finished",
	},
}

// conditionUpdater collects what went wrong in one pass over a namespace
// and turns it into the namespace's conditions.
type conditionUpdater struct {
	now         metav1.Time
	failing     []corev1.NamespaceCondition
	contentErrs []error
}

func (u *conditionUpdater) fail(t corev1.NamespaceConditionType, reason, message string) {
	u.failing = append(u.failing, corev1.NamespaceCondition{
		Type: t, Status: corev1.ConditionTrue, LastTransitionTime: u.now, Reason: reason,
		Message: message,
	})
}

// discoveryFailed records a discovery error; a partial failure says how
// many groups failed.
func (u *conditionUpdater) discoveryFailed(err error) {
	msg := err.Error()
	var partial *discovery.ErrGroupDiscoveryFailed
	if errors.As(err, &partial) {
		msg = fmt.Sprintf(
			"Discovery failed for some groups, %d failing: %v",
			len(partial.Groups),
			err,
		)
	}
	u.fail(corev1.NamespaceDeletionDiscoveryFailure, "DiscoveryFailed", msg)
}

// groupVersionFailed records a group version discovery gave that does not
// parse.
func (u *conditionUpdater) groupVersionFailed(err error) {
	u.fail(corev1.NamespaceDeletionGVParsingFailure, "GroupVersionParsingFailed", err.Error())
}

// contentFailed records a resource whose objects could not all be deleted.
func (u *conditionUpdater) contentFailed(err error) { u.contentErrs = append(u.contentErrs, err) }

// contentRemaining records the objects left, per resource and per
// finalizer; nothing is recorded for empty maps.
func (u *conditionUpdater) contentRemaining(
	byResource map[schema.GroupVersionResource]int,
	byFinalizer map[string]int,
) {
	var resources []string
	for gvr, n := range byResource {
		if n > 0 {
			resources = append(
				resources,
				fmt.Sprintf("%s.%s has %d resource instances", gvr.Resource, gvr.Group, n),
			)
		}
	}
	if len(byResource) > 0 {
		slices.Sort(resources)
		u.fail(corev1.NamespaceContentRemaining, "SomeResourcesRemain",
			"Some resources are remaining: "+strings.Join(resources, ", "))
	}
	var finalizers []string
	for f, n := range byFinalizer {
		if n > 0 {
			finalizers = append(finalizers, fmt.Sprintf("%s in %d resource instances", f, n))
		}
	}
	if len(byFinalizer) > 0 {
		slices.Sort(finalizers)
		u.fail(
			corev1.NamespaceFinalizersRemaining,
			"SomeFinalizersRemain",
			"Some content in the namespace has finalizers remaining: "+strings.Join(
				finalizers,
				", ",
			),
		)
	}
}

func findCondition(
	conds []corev1.NamespaceCondition,
	t corev1.NamespaceConditionType,
) *corev1.NamespaceCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// apply sets every owned condition of status: the failure recorded, else
// the "ok" variant. A condition's lastTransitionTime changes only with its
// status. It reports whether status changed.
func (u *conditionUpdater) apply(status *corev1.NamespaceStatus) bool {
	failing := slices.Clone(u.failing)
	if findCondition(failing, corev1.NamespaceDeletionContentFailure) == nil &&
		len(u.contentErrs) > 0 {
		msgs := make([]string, 0, len(u.contentErrs))
		for _, err := range u.contentErrs {
			msgs = append(msgs, err.Error())
		}
		slices.Sort(msgs)
		failing = append(failing, corev1.NamespaceCondition{
			Type: corev1.NamespaceDeletionContentFailure, Status: corev1.ConditionTrue,
			LastTransitionTime: u.now, Reason: "ContentDeletionFailed",
			Message: fmt.Sprintf(
				"Failed to delete all resource types, %d remaining: %v",
				len(u.contentErrs),
				strings.Join(msgs, ", "),
			),
		})
	}
	changed := false
	for _, t := range conditionTypes {
		want := findCondition(failing, t)
		if want == nil {
			ok := okConditions[t]
			want = &corev1.NamespaceCondition{
				Type:               t,
				Status:             corev1.ConditionFalse,
				LastTransitionTime: u.now,
				Reason:             ok.reason,
				Message:            ok.message,
			}
		}
		have := findCondition(status.Conditions, t)
		switch {
		case have == nil:
			status.Conditions = append(status.Conditions, *want)
			changed = true
		case have.Status != want.Status || have.Reason != want.Reason || have.Message != want.Message:
			if have.Status != want.Status {
				have.LastTransitionTime = u.now
			}
			have.Status, have.Reason, have.Message = want.Status, want.Reason, want.Message
			changed = true
		}
	}
	return changed
}
