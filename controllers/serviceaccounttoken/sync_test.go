package serviceaccounttoken

import (
	"crypto"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/workloop"
)

var (
	testCA      = []byte("-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n")
	secretsGVR  = corev1.SchemeGroupVersion.WithResource("secrets")
	accountsGVR = corev1.SchemeGroupVersion.WithResource("serviceaccounts")
)

func account(name, uid string, secrets ...string) *corev1.ServiceAccount {
	sa := &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       "ns",
			Name:            name,
			UID:             types.UID(uid),
			ResourceVersion: "1",
		},
	}
	for _, s := range secrets {
		sa.Secrets = append(sa.Secrets, corev1.ObjectReference{Name: s})
	}
	return sa
}

// token is a token secret of saName (and saUID, when set) holding data.
func token(name, saName, saUID string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       "ns",
			Name:            name,
			UID:             types.UID(name + "-uid"),
			ResourceVersion: "5",
			Annotations:     map[string]string{corev1.ServiceAccountNameKey: saName},
		},
		Type: corev1.SecretTypeServiceAccountToken,
	}
	if saUID != "" {
		s.Annotations[corev1.ServiceAccountUIDKey] = saUID
	}
	if data != nil {
		s.Data = map[string][]byte{}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
	}
	return s
}

// complete is the data of a filled token secret in namespace ns.
func complete() map[string]string {
	return map[string]string{"token": "old.jwt.token", "ca.crt": string(testCA), "namespace": "ns"}
}

// fixture is a controller over a fake API server and caches the test
// fills; sync functions are called directly.
type fixture struct {
	t      *testing.T
	key    crypto.Signer
	client *fake.Clientset
	c      *controller
}

// newFixture caches cached (ServiceAccounts and Secrets) and gives the
// API server live; live defaults to cached.
func newFixture(t *testing.T, cached []runtime.Object, live []runtime.Object) *fixture {
	t.Helper()
	if live == nil {
		live = cached
	}
	client := fake.NewClientset(controllertest.DeepCopies(live...)...)
	key := NewTestKey(t, "p256")
	s, err := newSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, key: key, client: client, c: &controller{
		client: client,
		serviceAccounts: corelisters.NewServiceAccountLister(
			controllertest.NamespacedIndexer(
				t,
				controllertest.OfType[*corev1.ServiceAccount](cached)...),
		),
		secrets: corelisters.NewSecretLister(
			controllertest.NamespacedIndexer(t, controllertest.OfType[*corev1.Secret](cached)...),
		),
		signer:        s,
		rootCA:        testCA,
		removeBackoff: wait.Backoff{Steps: 3, Duration: time.Millisecond},
	}}
}

// writes lists the fake API server's mutating actions as "verb resource
// name".
func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.client.Actions() {
		// By verb: UpdateAction and CreateAction are the same interface, so
		// a type switch would report every create as an update.
		switch a.GetVerb() {
		case "update":
			name := a.(clienttesting.UpdateAction).GetObject().(metav1.Object).GetName()
			out = append(out, "update "+a.GetResource().Resource+" "+name)
		case "delete":
			out = append(
				out,
				"delete "+a.GetResource().Resource+" "+a.(clienttesting.DeleteAction).GetName(),
			)
		case "create":
			out = append(out, "create "+a.GetResource().Resource)
		}
	}
	return out
}

func (f *fixture) secret(name string) *corev1.Secret {
	f.t.Helper()
	obj, err := f.client.Tracker().Get(secretsGVR, "ns", name)
	if err != nil {
		f.t.Fatal(err)
	}
	return obj.(*corev1.Secret)
}

// failing makes the fake API server answer verb on resource with err.
func failing(verb, resource string, err error) func(*fake.Clientset) {
	return func(c *fake.Clientset) {
		c.PrependReactor(
			verb,
			resource,
			func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, err },
		)
	}
}

// errKind classifies a sync's error as the loop acts on it.
func errKind(err error) string {
	switch {
	case err == nil:
		return ""
	case workloop.IsPermanent(err):
		return "dropped"
	default:
		return "retried"
	}
}

var (
	errServer = apierrors.NewInternalError(errors.New("boom"))
	conflict  = apierrors.NewConflict(
		schema.GroupResource{Resource: "secrets"},
		"x",
		errors.New("changed"),
	)
	notFound = apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "x")
)

func TestSyncSecret(t *testing.T) {
	tests := []struct {
		name    string
		cached  []runtime.Object
		live    []runtime.Object // nil: as cached
		key     string           // "": the key of the first cached secret
		react   func(*fake.Clientset)
		want    []string
		wantErr string
		check   func(*testing.T, *fixture)
	}{{
		name: "fills token, ca.crt, namespace and the uid annotation",
		cached: []runtime.Object{
			account("builder", "sa-uid"),
			token("builder-token", "builder", "", nil),
		},
		want: []string{"update secrets builder-token"},
		check: func(t *testing.T, f *fixture) {
			s := f.secret("builder-token")
			if string(s.Data["ca.crt"]) != string(testCA) || string(s.Data["namespace"]) != "ns" {
				t.Errorf("data %q", s.Data)
			}
			if s.Annotations[corev1.ServiceAccountUIDKey] != "sa-uid" ||
				s.Annotations[corev1.ServiceAccountNameKey] != "builder" {
				t.Errorf("annotations %v", s.Annotations)
			}
			tok, err := jwt.ParseSigned(string(s.Data["token"]), allAlgs)
			if err != nil {
				t.Fatal(err)
			}
			var claims map[string]any
			if err := tok.Claims(f.key.Public(), &claims); err != nil {
				t.Fatalf("verifying with the public key: %v", err)
			}
			if claims[claimSecretName] != "builder-token" ||
				claims[ClaimServiceAccountUID] != "sa-uid" ||
				claims["sub"] != "system:serviceaccount:ns:builder" {
				t.Errorf("claims %v", claims)
			}
		},
	}, {
		name: "complete secret: nothing written",
		cached: []runtime.Object{
			account("builder", "sa-uid"),
			token("builder-token", "builder", "sa-uid", complete()),
		},
	}, {
		name: "only a wrong ca.crt: replaced, token and namespace kept",
		cached: []runtime.Object{
			account("builder", "sa-uid"),
			token("builder-token", "builder", "sa-uid",
				map[string]string{"token": "kept", "ca.crt": "stale", "namespace": "custom"}),
		},
		want: []string{"update secrets builder-token"},
		check: func(t *testing.T, f *fixture) {
			s := f.secret("builder-token")
			if string(s.Data["token"]) != "kept" || string(s.Data["ca.crt"]) != string(testCA) ||
				string(s.Data["namespace"]) != "custom" {
				t.Errorf("data %q", s.Data)
			}
		},
	}, {
		name: "cache behind the API server: skipped until the update event",
		cached: []runtime.Object{
			account("builder", "sa-uid"),
			token("builder-token", "builder", "", nil),
		},
		live: []runtime.Object{account("builder", "sa-uid"), func() runtime.Object {
			s := token("builder-token", "builder", "", nil)
			s.ResourceVersion = "6"
			return s
		}()},
	}, {
		name:   "service account missing from cache and API server: secret deleted",
		cached: []runtime.Object{token("ghost-token", "ghost", "", nil)},
		want:   []string{"delete secrets ghost-token"},
		check: func(t *testing.T, f *fixture) {
			for _, a := range f.client.Actions() {
				if d, ok := a.(clienttesting.DeleteAction); ok {
					if p := d.GetDeleteOptions().Preconditions; p == nil || p.UID == nil ||
						*p.UID != "ghost-token-uid" {
						t.Errorf("delete preconditions %+v, want the secret's uid", p)
					}
				}
			}
		},
	}, {
		name: "service account with another uid: secret deleted",
		cached: []runtime.Object{
			account("builder", "new-uid"),
			token("builder-token", "builder", "old-uid", complete()),
		},
		want: []string{"delete secrets builder-token"},
	}, {
		name:   "service account not cached yet but live: filled",
		cached: []runtime.Object{token("builder-token", "builder", "", nil)},
		live: []runtime.Object{
			account("builder", "sa-uid"),
			token("builder-token", "builder", "", nil),
		},
		want: []string{"update secrets builder-token"},
	}, {
		name:   "secret gone: removed from its service account's secrets",
		cached: []runtime.Object{account("builder", "sa-uid", "a", "builder-token", "b")},
		key:    secretKey(token("builder-token", "builder", "sa-uid", nil)),
		want:   []string{"update serviceaccounts builder"},
		check: func(t *testing.T, f *fixture) {
			obj, err := f.client.Tracker().Get(accountsGVR, "ns", "builder")
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, r := range obj.(*corev1.ServiceAccount).Secrets {
				names = append(names, r.Name)
			}
			if !slices.Equal(names, []string{"a", "b"}) {
				t.Errorf("secrets %v, want [a b]", names)
			}
		},
	}, {
		name:   "secret gone, not listed: nothing written",
		cached: []runtime.Object{account("builder", "sa-uid", "a")},
		key:    secretKey(token("builder-token", "builder", "sa-uid", nil)),
	}, {
		name:   "secret gone, service account replaced: nothing written",
		cached: []runtime.Object{account("builder", "new-uid", "builder-token")},
		key:    secretKey(token("builder-token", "builder", "old-uid", nil)),
	}, {
		name:   "secret gone, reference removal conflicts once: retried at once",
		cached: []runtime.Object{account("builder", "sa-uid", "builder-token")},
		key:    secretKey(token("builder-token", "builder", "sa-uid", nil)),
		react: func(c *fake.Clientset) {
			n := 0
			c.PrependReactor(
				"update",
				"serviceaccounts",
				func(clienttesting.Action) (bool, runtime.Object, error) {
					n++
					if n == 1 {
						return true, nil, conflict
					}
					return false, nil, nil
				},
			)
		},
		want: []string{"update serviceaccounts builder", "update serviceaccounts builder"},
	}, {
		name:    "secret gone, reference removal fails: dropped (KCM does not retry it)",
		cached:  []runtime.Object{account("builder", "sa-uid", "builder-token")},
		key:     secretKey(token("builder-token", "builder", "sa-uid", nil)),
		react:   failing("update", "serviceaccounts", errServer),
		want:    []string{"update serviceaccounts builder"},
		wantErr: "dropped",
	}, {
		name: "a secret of another uid is not this key's: its service account's secrets are cleaned",
		cached: []runtime.Object{
			account("builder", "sa-uid", "builder-token"),
			token("builder-token", "builder", "", nil),
		},
		key:  "ns/builder-token/other-uid/builder/",
		want: []string{"update serviceaccounts builder"},
	}, {
		name: "update conflict: forgotten, the update event comes",
		cached: []runtime.Object{
			account("builder", "sa-uid"),
			token("builder-token", "builder", "", nil),
		},
		react: failing("update", "secrets", conflict),
		want:  []string{"update secrets builder-token"},
	}, {
		name: "update fails: retried",
		cached: []runtime.Object{
			account("builder", "sa-uid"),
			token("builder-token", "builder", "", nil),
		},
		react:   failing("update", "secrets", errServer),
		want:    []string{"update secrets builder-token"},
		wantErr: "retried",
	}, {
		name: "live get fails: retried",
		cached: []runtime.Object{
			account("builder", "sa-uid"),
			token("builder-token", "builder", "", nil),
		},
		react:   failing("get", "secrets", errServer),
		wantErr: "retried",
	}, {
		name: "live get not found: dropped",
		cached: []runtime.Object{
			account("builder", "sa-uid"),
			token("builder-token", "builder", "", nil),
		},
		react:   failing("get", "secrets", notFound),
		wantErr: "dropped",
	}, {
		name:    "service account lookup fails: retried",
		cached:  []runtime.Object{token("builder-token", "builder", "", nil)},
		react:   failing("get", "serviceaccounts", errServer),
		wantErr: "retried",
	}, {
		name:    "delete fails: retried",
		cached:  []runtime.Object{token("ghost-token", "ghost", "", nil)},
		react:   failing("delete", "secrets", errServer),
		want:    []string{"delete secrets ghost-token"},
		wantErr: "retried",
	}, {
		name:   "delete conflicts (the secret was replaced): forgotten",
		cached: []runtime.Object{token("ghost-token", "ghost", "", nil)},
		react:  failing("delete", "secrets", conflict),
		want:   []string{"delete secrets ghost-token"},
	}, {
		name:    "key without a service account name: dropped",
		key:     "ns/builder-token/uid//",
		wantErr: "dropped",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.cached, tt.live)
			if tt.react != nil {
				tt.react(f.client)
			}
			key := tt.key
			if key == "" {
				key = secretKey(controllertest.OfType[*corev1.Secret](tt.cached)[0])
			}
			err := f.c.syncSecret(controllertest.LogContext(t), key)
			if got := errKind(err); got != tt.wantErr {
				t.Errorf("error %v (%q), want %q", err, got, tt.wantErr)
			}
			if got := f.writes(); !slices.Equal(got, tt.want) {
				t.Errorf("writes %q, want %q", got, tt.want)
			}
			if tt.check != nil {
				tt.check(t, f)
			}
		})
	}
}

func TestSyncServiceAccount(t *testing.T) {
	others := []runtime.Object{
		token("keep-other-sa", "other", "", nil),
		token("keep-new-uid", "builder", "new-uid", nil),
		func() runtime.Object {
			s := token("keep-opaque", "builder", "", nil)
			s.Type = corev1.SecretTypeOpaque
			return s
		}(),
	}
	tests := []struct {
		name    string
		cached  []runtime.Object
		react   func(*fake.Clientset)
		want    []string
		wantErr string
	}{{
		name: "service account exists: nothing written",
		cached: append(
			[]runtime.Object{
				account("builder", "sa-uid"),
				token("builder-token", "builder", "sa-uid", nil),
			},
			others...),
	}, {
		name: "service account gone: its token secrets deleted, with or without the uid annotation",
		cached: append(
			[]runtime.Object{
				token("by-uid", "builder", "sa-uid", nil),
				token("by-name", "builder", "", nil),
			},
			others...),
		want: []string{"delete secrets by-name", "delete secrets by-uid"},
	}, {
		name: "service account replaced by one with another uid: the old one's tokens deleted",
		cached: append(
			[]runtime.Object{
				account("builder", "new-uid"),
				token("by-uid", "builder", "sa-uid", nil),
			},
			others...),
		want: []string{"delete secrets by-uid"},
	}, {
		name: "a delete fails: retried, the others still deleted",
		cached: []runtime.Object{
			token("by-uid", "builder", "sa-uid", nil),
			token("by-name", "builder", "", nil),
		},
		react:   failing("delete", "secrets", errServer),
		want:    []string{"delete secrets by-name", "delete secrets by-uid"},
		wantErr: "retried",
	}, {
		name:   "already gone: forgotten",
		cached: []runtime.Object{token("by-uid", "builder", "sa-uid", nil)},
		react:  failing("delete", "secrets", notFound),
		want:   []string{"delete secrets by-uid"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.cached, nil)
			if tt.react != nil {
				tt.react(f.client)
			}
			err := f.c.syncServiceAccount(
				controllertest.LogContext(t),
				serviceAccountKey(account("builder", "sa-uid")),
			)
			if got := errKind(err); got != tt.wantErr {
				t.Errorf("error %v (%q), want %q", err, got, tt.wantErr)
			}
			got := f.writes()
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("writes %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("invalid key: dropped", func(t *testing.T) {
		f := newFixture(t, nil, nil)
		if err := f.c.syncServiceAccount(controllertest.LogContext(t), "ns/builder"); errKind(
			err,
		) != "dropped" {
			t.Errorf("error %v, want dropped", err)
		}
	})
}

// TestKeys: secret keys survive annotation values with slashes and
// percent signs; handlers enqueue token secrets only, and tombstones.
func TestKeys(t *testing.T) {
	s := token("t", "odd/name%2F", "u/id", nil)
	ref, err := parseSecretKey(secretKey(s))
	if err != nil {
		t.Fatal(err)
	}
	if want := (secretRef{"ns", "t", "t-uid", "odd/name%2F", "u/id"}); ref != want {
		t.Errorf("parsed %+v, want %+v", ref, want)
	}
	for _, bad := range []string{"", "a/b/c", "ns/n/uid/%zz/", "/n/uid/sa/"} {
		if _, err := parseSecretKey(bad); err == nil {
			t.Errorf("parseSecretKey(%q) succeeded", bad)
		}
	}

	c := &controller{
		saLoop:     workloop.New("sa", nil, workloop.Options{}),
		secretLoop: workloop.New("secret", nil, workloop.Options{}),
	}
	defer c.saLoop.ShutDown()
	defer c.secretLoop.ShutDown()
	opaque := token("opaque", "builder", "", nil)
	opaque.Type = corev1.SecretTypeOpaque
	c.secretChanged(opaque)
	c.secretChanged(token("a", "builder", "", nil))
	c.secretChanged(cacheTombstone(token("b", "builder", "", nil)))
	c.serviceAccountChanged(cacheTombstone(account("builder", "sa-uid")))
	if c.secretLoop.Len() != 2 || c.saLoop.Len() != 1 {
		t.Errorf(
			"queued %d secrets (want 2: not the opaque one) and %d service accounts (want 1)",
			c.secretLoop.Len(),
			c.saLoop.Len(),
		)
	}
}

func TestErrorsNameTheObject(t *testing.T) {
	f := newFixture(t, []runtime.Object{token("ghost-token", "ghost", "", nil)}, nil)
	failing("delete", "secrets", errServer)(f.client)
	err := f.c.syncSecret(
		controllertest.LogContext(t),
		secretKey(token("ghost-token", "ghost", "", nil)),
	)
	if err == nil || !strings.Contains(err.Error(), "ns/ghost-token") {
		t.Errorf("error %v does not name the secret", err)
	}
}

// cacheTombstone wraps obj as an informer does a deletion it missed.
func cacheTombstone(obj metav1.Object) cache.DeletedFinalStateUnknown {
	return cache.DeletedFinalStateUnknown{Key: obj.GetNamespace() + "/" + obj.GetName(), Obj: obj}
}
