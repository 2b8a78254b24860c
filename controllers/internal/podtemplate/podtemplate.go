// Package podtemplate computes the hash KCM names a template's revisions
// with: a Deployment's ReplicaSets (<deployment>-<hash>, and the
// pod-template-hash label) and a DaemonSet's ControllerRevisions; and what
// a DaemonSet's or a StatefulSet's ControllerRevision holds, and its name.
// One copy, so that those names never drift apart from KCM's, or each
// other.
package podtemplate

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/dump"
)

// Hash is KCM's hash of t: FNV-1a (32 bit) over the hash-printing of the
// template (k8s.io/utils/dump's ForHash, the printer KCM's hash package
// uses), followed, when collisionCount is set, by that count as eight
// little-endian bytes (the upper four zero); the decimal sum is encoded
// with rand.SafeEncodeString.
func Hash(t *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(*t))
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		_, _ = h.Write(b)
	}
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// RevisionPatch is what KCM stores in a DaemonSet's or a StatefulSet's
// ControllerRevision: a strategic-merge patch that replaces the owner's
// spec.template with the current one, {"spec":{"template":{...,
// "$patch":"replace"}}}. The owner goes through encoding/json both ways, as
// in KCM (keys sorted, numbers as float64), so that the bytes, which decide
// whether a revision is current (and name a StatefulSet's revisions through
// their hash), are KCM's.
func RevisionPatch(owner any) ([]byte, error) {
	b, err := json.Marshal(owner)
	if err != nil {
		return nil, err
	}
	var whole map[string]any
	if err := json.Unmarshal(b, &whole); err != nil {
		return nil, err
	}
	spec, _ := whole["spec"].(map[string]any)
	tmpl, ok := spec["template"].(map[string]any)
	if !ok {
		return nil, errors.New("spec.template is missing")
	}
	tmpl["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": tmpl}})
}

// RevisionName is KCM's name of an owner's ControllerRevision:
// "<owner>-<hash>", the owner's name cut at 223 characters.
func RevisionName(owner, hash string) string {
	if len(owner) > 223 {
		owner = owner[:223]
	}
	return owner + "-" + hash
}
