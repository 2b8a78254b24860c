package deployment

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/dump"
)

// templateHash is the pod-template-hash of t as kube-controller-manager
// computes it, so that ReplicaSet names (<deployment>-<hash>) agree with
// KCM's: FNV-32a over the hash-printing of the template (k8s.io/utils/dump's
// ForHash, the printer KCM's hash package uses), followed, when the
// Deployment has a collisionCount, by that count as eight little-endian
// bytes; the decimal sum is then encoded with rand.SafeEncodeString.
func templateHash(t *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(*t))
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		_, _ = h.Write(b)
	}
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// replicaSetName is "<deployment>-<hash>", the Deployment's name cut so that
// the whole stays a valid DNS subdomain.
func replicaSetName(deployment, hash string) string {
	room := validation.DNS1123SubdomainMaxLength - 1 - len(hash)
	if len(deployment) > room && room > 0 {
		deployment = deployment[:room]
	}
	return deployment + "-" + hash
}
