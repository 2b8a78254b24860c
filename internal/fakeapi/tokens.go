package fakeapi

import (
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// token answers a TokenRequest for a ServiceAccount that exists with a
// token of no meaning to anything but this server, valid for the
// expirationSeconds asked (an hour by default). Nothing is stored.
func (s *Server) token(r Resource, ns, name string, body []byte) (map[string]any, error) {
	req, err := decode(body)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.objects[r.GVR][key(r, ns, name)] == nil {
		return nil, apierrors.NewNotFound(r.GVR.GroupResource(), name)
	}
	secs := int64(3600)
	if v, ok := nested(req, "spec", "expirationSeconds"); ok {
		if n, ok := toInt64(v); ok && n > 0 {
			secs = n
		}
	}
	s.uid++
	spec, _ := req["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
	}
	spec["expirationSeconds"] = secs
	return map[string]any{
		"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
		"metadata": map[string]any{"name": name, "namespace": ns,
			"creationTimestamp": timestamp(time.Now())},
		"spec": spec,
		"status": map[string]any{
			"token":               fmt.Sprintf("fakeapi.%s.%s.%d", ns, name, s.uid),
			"expirationTimestamp": timestamp(time.Now().Add(time.Duration(secs) * time.Second)),
		},
	}, nil
}
