package deployment

import (
	"k8s.io/apimachinery/pkg/util/validation"
)

// replicaSetName is "<deployment>-<hash>", the Deployment's name cut so that
// the whole stays a valid DNS subdomain.
func replicaSetName(deployment, hash string) string {
	room := validation.DNS1123SubdomainMaxLength - 1 - len(hash)
	if len(deployment) > room && room > 0 {
		deployment = deployment[:room]
	}
	return deployment + "-" + hash
}
