//go:build integration

package differential_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	k8sscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/pcrcleaner"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// podCertificateRequest returns a request of a custom signer for a pod
// that need not exist (the API server checks the request's form, and
// its stub request's signature, only).
func podCertificateRequest(t *testing.T, name string) *certv1.PodCertificateRequest {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	stub, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certv1.PodCertificateRequestSpec{
			SignerName: "example.com/differential", PodName: "pod",
			PodUID:             types.UID(uuid.NewUUID()),
			ServiceAccountName: "default", ServiceAccountUID: types.UID(uuid.NewUUID()),
			NodeName: "node", NodeUID: types.UID(uuid.NewUUID()),
			MaxExpirationSeconds: ptr.To[int32](86400),
			StubPKCS10Request:    stub,
		},
	}
}

// etcdPut stores value at key through etcd's JSON gateway.
func etcdPut(ctx context.Context, etcdURL, key string, value []byte) error {
	body, err := json.Marshal(map[string]string{
		"key":   base64.StdEncoding.EncodeToString([]byte(key)),
		"value": base64.StdEncoding.EncodeToString(value),
	})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, etcdURL+"/v3/kv/put",
		bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd put %s: %s", key, resp.Status)
	}
	return nil
}

// storeAged writes r into ns through etcd, as the API server stores it,
// created age ago: the API server sets the creation time of what it is
// given, and no request old enough to be cleaned could be made through it.
func storeAged(ctx context.Context, etcdURL, ns string, r *certv1.PodCertificateRequest,
	age time.Duration) error {
	r = r.DeepCopy()
	r.Namespace, r.UID = ns, types.UID(uuid.NewUUID())
	r.CreationTimestamp = metav1.NewTime(time.Now().Add(-age).Truncate(time.Second))
	enc := k8sscheme.Codecs.EncoderForVersion(
		protobuf.NewSerializer(k8sscheme.Scheme, k8sscheme.Scheme), certv1.SchemeGroupVersion)
	var b bytes.Buffer
	if err := enc.Encode(r, &b); err != nil {
		return err
	}
	return etcdPut(ctx, etcdURL, "/registry/podcertificaterequests/"+ns+"/"+r.Name, b.Bytes())
}

// TestPCRCleaner: of requests made fourteen minutes, sixteen minutes and
// an hour ago (the older two stored through etcd) and one made now, the
// first pass deletes those older than fifteen minutes.
func TestPCRCleaner(t *testing.T) {
	e := env(t)
	r := runner(t, e)
	upstreamAfterSync(&r, pcrcleaner.Name, func(cc descriptor.Context) cache.SharedIndexInformer {
		return cc.InformerFactory.Certificates().V1().PodCertificateRequests().Informer()
	})
	ages := map[string]time.Duration{"made-14m-ago": 14 * time.Minute,
		"made-16m-ago": 16 * time.Minute, "made-1h-ago": time.Hour}
	start := time.Now()
	res, err := r.Run(t.Context(), differential.Scenario{
		Name:       "podcertificaterequest-cleaner deletes requests older than 15 minutes",
		Controller: pcrcleaner.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if _, err := cs.CertificatesV1().PodCertificateRequests(ns).Create(ctx,
				podCertificateRequest(t, "made-now"), metav1.CreateOptions{}); err != nil {
				return err
			}
			for name, age := range ages {
				err := storeAged(ctx, e.EtcdURL(), ns, podCertificateRequest(t, name), age)
				if err != nil {
					return err
				}
			}
			// Through the API server, as a controller will see them.
			l, err := cs.CertificatesV1().PodCertificateRequests(ns).List(ctx,
				metav1.ListOptions{})
			if err != nil || len(l.Items) != 1+len(ages) {
				return fmt.Errorf("the API server lists %d requests (%v), want %d",
					len(l.Items), err, 1+len(ages))
			}
			return nil
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface,
			ns string) ([]runtime.Object, error) {
			l, err := cs.CertificatesV1().PodCertificateRequests(ns).List(ctx,
				metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			for i := range l.Items {
				l.Items[i].Kind = "PodCertificateRequest"
			}
			return objects(l.Items,
				func(r *certv1.PodCertificateRequest) runtime.Object { return r }), nil
		},
		Settled: func(state []map[string]any) bool {
			return count(state, "PodCertificateRequest") == 2
		},
		// Public keys, proofs and UIDs are drawn anew for each side.
		IgnoreFields: []string{"spec"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("both sides settled in %v", time.Since(start).Round(time.Millisecond))
	if d := res.Diff(); d != "" {
		t.Errorf("native and upstream differ:\n%s", d)
	}
	var kept []string
	for _, o := range res.Native {
		kept = append(kept, nameOf(o))
	}
	if fmt.Sprint(kept) != "[made-14m-ago made-now]" {
		t.Errorf("native side kept %q, want [made-14m-ago made-now]", kept)
	}
}
