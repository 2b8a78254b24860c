package storageversiongc

import (
	"testing"
	"time"

	v1alpha1 "k8s.io/api/apiserverinternal/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestSetCommonEncoding(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	entries := func(versions ...string) []v1alpha1.ServerStorageVersion {
		var out []v1alpha1.ServerStorageVersion
		for i, v := range versions {
			out = append(out, v1alpha1.ServerStorageVersion{
				APIServerID: string(rune('a' + i)), EncodingVersion: v})
		}
		return out
	}
	cond := func(s v1alpha1.ConditionStatus) []v1alpha1.StorageVersionCondition {
		return []v1alpha1.StorageVersionCondition{{Type: v1alpha1.AllEncodingVersionsEqual,
			Status: s, LastTransitionTime: then}}
	}
	for _, tc := range []struct {
		name       string
		common     *string
		conds      []v1alpha1.StorageVersionCondition
		entries    []v1alpha1.ServerStorageVersion
		wantCommon *string
		wantStatus v1alpha1.ConditionStatus
		wantMoved  bool
	}{
		{"all alike, no condition yet", nil, nil, entries("v1", "v1"), ptr.To("v1"),
			v1alpha1.ConditionTrue, true},
		{"alike, unchanged", ptr.To("v1"), cond(v1alpha1.ConditionTrue), entries("v1"),
			ptr.To("v1"), v1alpha1.ConditionTrue, false},
		{"now alike after a disagreement", nil, cond(v1alpha1.ConditionFalse),
			entries("v2", "v2"), ptr.To("v2"), v1alpha1.ConditionTrue, true},
		{"the common version moved", ptr.To("v1"), cond(v1alpha1.ConditionTrue),
			entries("v2"), ptr.To("v2"), v1alpha1.ConditionTrue, true},
		{"disagreeing", ptr.To("v1"), cond(v1alpha1.ConditionTrue), entries("v1", "v2"),
			nil, v1alpha1.ConditionFalse, true},
		{"still disagreeing", nil, cond(v1alpha1.ConditionFalse), entries("v1", "v2"),
			nil, v1alpha1.ConditionFalse, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sv := &v1alpha1.StorageVersion{Status: v1alpha1.StorageVersionStatus{
				CommonEncodingVersion: tc.common, Conditions: tc.conds,
				StorageVersions: tc.entries}}
			setCommonEncoding(sv, now)
			if got := sv.Status.CommonEncodingVersion; (got == nil) != (tc.wantCommon == nil) ||
				got != nil && *got != *tc.wantCommon {
				t.Errorf("common version %v, want %v", got, tc.wantCommon)
			}
			if len(sv.Status.Conditions) != 1 {
				t.Fatalf("%d conditions, want 1", len(sv.Status.Conditions))
			}
			c := sv.Status.Conditions[0]
			if c.Status != tc.wantStatus {
				t.Errorf("status %s, want %s", c.Status, tc.wantStatus)
			}
			if moved := c.LastTransitionTime.Time.Equal(now); moved != tc.wantMoved {
				t.Errorf("transition time moved %v, want %v", moved, tc.wantMoved)
			}
		})
	}
}
