package storageversiongc

import (
	"time"

	apiserverinternalv1alpha1 "k8s.io/api/apiserverinternal/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// setCommonEncoding recomputes sv's common encoding version and its
// AllEncodingVersionsEqual condition after its entries changed, as the API
// server's own storage-version updater does: the version is set when every
// entry encodes alike and unset otherwise; the condition's transition time
// moves (to now) when its status changes or the common version changes
// from one value to another.
func setCommonEncoding(sv *apiserverinternalv1alpha1.StorageVersion, now time.Time) {
	var before string
	hadBefore := sv.Status.CommonEncodingVersion != nil
	if hadBefore {
		before = *sv.Status.CommonEncodingVersion
	}
	sv.Status.CommonEncodingVersion = nil
	if entries := sv.Status.StorageVersions; len(entries) > 0 {
		first := entries[0].EncodingVersion
		alike := true
		for _, e := range entries[1:] {
			alike = alike && e.EncodingVersion == first
		}
		if alike {
			sv.Status.CommonEncodingVersion = &first
		}
	}
	cond := apiserverinternalv1alpha1.StorageVersionCondition{
		Type:               apiserverinternalv1alpha1.AllEncodingVersionsEqual,
		Status:             apiserverinternalv1alpha1.ConditionFalse,
		ObservedGeneration: sv.Generation,
		LastTransitionTime: metav1.NewTime(now),
		Reason:             "CommonEncodingVersionUnset",
		Message:            "Common encoding version unset",
	}
	common := sv.Status.CommonEncodingVersion
	if common != nil {
		cond.Status = apiserverinternalv1alpha1.ConditionTrue
		cond.Reason = "CommonEncodingVersionSet"
		cond.Message = "Common encoding version set"
	}
	moved := hadBefore && common != nil && before != *common
	for i := range sv.Status.Conditions {
		old := &sv.Status.Conditions[i]
		if old.Type != cond.Type {
			continue
		}
		if old.Status != cond.Status || moved {
			old.LastTransitionTime = cond.LastTransitionTime
		}
		old.Status, old.Reason, old.Message = cond.Status, cond.Reason, cond.Message
		old.ObservedGeneration = cond.ObservedGeneration
		return
	}
	sv.Status.Conditions = append(sv.Status.Conditions, cond)
}
