// Package podtemplate computes the hash KCM names a template's revisions
// with: a Deployment's ReplicaSets (<deployment>-<hash>, and the
// pod-template-hash label) and a DaemonSet's ControllerRevisions. One
// copy, so that those names never drift apart from KCM's, or each other.
package podtemplate

import (
	"encoding/binary"
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
