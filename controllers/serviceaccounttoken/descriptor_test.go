package serviceaccounttoken_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/rootcacertpublisher"
	"github.com/ctrlhost/ctrlhost/controllers/serviceaccounttoken"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptorAndFlags(t *testing.T) {
	d := serviceaccounttoken.Descriptor(serviceaccounttoken.NewOptions())
	controllertest.CheckIdentity(
		t,
		d,
		controllertest.Identity{
			Name:  "serviceaccount-token-controller",
			Alias: "serviceaccount-token",
		},
	)
	if !d.IsStartFirst() {
		t.Error("not StartFirst; KCM starts the token controller before all others")
	}
	if _, sharded := d.IsSharded(); sharded {
		t.Error("sharded")
	}
	tests := []struct {
		flag, arg, def, usage string
		got                   func(serviceaccounttoken.Options) any
		want                  any
	}{
		{"service-account-private-key-file", "--service-account-private-key-file=/k.pem", "",
			"Enables legacy secret-based tokens when set. Filename containing a PEM-encoded private RSA or ECDSA key used to sign service account tokens.",
			func(o serviceaccounttoken.Options) any { return o.ServiceAccountKeyFile }, "/k.pem"},
		{"concurrent-serviceaccount-token-syncs", "--concurrent-serviceaccount-token-syncs=7", "5",
			"The number of service account token objects that are allowed to sync concurrently. Larger number = more responsive token generation, but more CPU (and network) load",
			func(o serviceaccounttoken.Options) any { return o.ConcurrentSATokenSyncs }, int32(7)},
		{"root-ca-file", "--root-ca-file=/ca.crt", "",
			"If set, this root certificate authority will be included in service account's token secret. This must be a valid PEM-encoded CA bundle.",
			func(o serviceaccounttoken.Options) any { return o.RootCAFile }, "/ca.crt"},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			o := serviceaccounttoken.NewOptions()
			f := controllertest.ParseFlag(t, o.AddFlags, tt.flag, tt.arg)
			if f.DefValue != tt.def || f.Usage != tt.usage {
				t.Errorf("default %q usage %q", f.DefValue, f.Usage)
			}
			if got := tt.got(o); got != tt.want {
				t.Errorf("value %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRootCAFileIsSharedWithThePublisher: KCM has one --root-ca-file; with
// both controllers' flags on one flag set, in either order, the value
// reaches both.
func TestRootCAFileIsSharedWithThePublisher(t *testing.T) {
	for _, tokenFirst := range []bool{true, false} {
		tok, pub := serviceaccounttoken.NewOptions(), rootcacertpublisher.NewOptions()
		adds := []func(*pflag.FlagSet){pub.AddFlags, tok.AddFlags}
		if tokenFirst {
			slices.Reverse(adds)
		}
		fs := controllertest.FlagSet(func(fs *pflag.FlagSet) {
			for _, add := range adds {
				add(fs)
			}
		})
		if err := fs.Parse([]string{"--root-ca-file=/shared.crt"}); err != nil {
			t.Fatal(err)
		}
		if tok.RootCAFile != "/shared.crt" || pub.RootCAFile != "/shared.crt" {
			t.Errorf(
				"token first %v: token controller %q, publisher %q",
				tokenFirst,
				tok.RootCAFile,
				pub.RootCAFile,
			)
		}
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	keyFile, _ := serviceaccounttoken.WriteTestKey(t, "rsa")
	edFile, _ := serviceaccounttoken.WriteTestKey(t, "ed25519")
	caFile, _ := serviceaccounttoken.WriteTestCA(t)
	garbage := serviceaccounttoken.WriteTestFile(t, "garbage", []byte("not PEM"))
	with := func(f func(*serviceaccounttoken.Options)) serviceaccounttoken.Options {
		o := serviceaccounttoken.NewOptions()
		f(&o)
		return o
	}
	const prefix = `descriptor "serviceaccount-token-controller": `
	tests := []struct {
		name    string
		o       serviceaccounttoken.Options
		wantErr []string
	}{
		{"defaults", serviceaccounttoken.NewOptions(), nil},
		{"zero value takes the defaults", serviceaccounttoken.Options{}, nil},
		{
			"key and CA",
			with(
				func(o *serviceaccounttoken.Options) { o.ServiceAccountKeyFile, o.RootCAFile = keyFile, caFile },
			),
			nil,
		},
		{
			"negative workers",
			with(func(o *serviceaccounttoken.Options) { o.ConcurrentSATokenSyncs = -1 }),
			[]string{
				prefix + "--concurrent-serviceaccount-token-syncs: must be at least 1, got -1",
			},
		},
		{"negative retries", with(func(o *serviceaccounttoken.Options) { o.MaxRetries = -2 }),
			[]string{"MaxRetries: must be at least 1, got -2"}},
		{
			"missing key file",
			with(
				func(o *serviceaccounttoken.Options) { o.ServiceAccountKeyFile = "/nonexistent/key.pem" },
			),
			[]string{`--service-account-private-key-file "/nonexistent/key.pem"`, "no such file"},
		},
		{
			"key file not a key",
			with(func(o *serviceaccounttoken.Options) { o.ServiceAccountKeyFile = garbage }),
			[]string{
				`--service-account-private-key-file "` + garbage + `"`,
				"give a PEM file holding an RSA or ECDSA private key",
			},
		},
		{
			"ed25519 key",
			with(func(o *serviceaccounttoken.Options) { o.ServiceAccountKeyFile = edFile }),
			[]string{
				`--service-account-private-key-file "` + edFile + `"`,
				"use an RSA or ECDSA private key",
			},
		},
		{"CA file not PEM", with(func(o *serviceaccounttoken.Options) { o.RootCAFile = garbage }),
			[]string{`--root-ca-file "` + garbage + `": not a PEM-encoded CA bundle`}},
		{"every problem at once", with(func(o *serviceaccounttoken.Options) {
			o.ConcurrentSATokenSyncs, o.ServiceAccountKeyFile, o.RootCAFile = -1, garbage, "/nonexistent/ca.crt"
		}), []string{"--concurrent-serviceaccount-token-syncs", "--service-account-private-key-file", "--root-ca-file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			controllertest.CheckBuild(t, serviceaccounttoken.Descriptor(tt.o), tt.wantErr...)
		})
	}
}

// TestInitWithoutKeyFileDoesNotStart: as in KCM, no key file means the
// controller chooses not to start.
func TestInitWithoutKeyFileDoesNotStart(t *testing.T) {
	c, err := controllertest.Init(
		t,
		serviceaccounttoken.Descriptor(serviceaccounttoken.NewOptions()),
		nil,
	)
	if c != nil || err != nil {
		t.Fatalf("Init = %v, %v; want nil, nil", c, err)
	}
}

// TestInitReportsAKeyFileThatNoLongerParses: the file is read again on each
// term; one that no longer holds a key fails the InitFunc, naming the flag.
func TestInitReportsAKeyFileThatNoLongerParses(t *testing.T) {
	o := serviceaccounttoken.NewOptions()
	o.ServiceAccountKeyFile = serviceaccounttoken.WriteTestFile(
		t,
		"key.pem",
		[]byte("rotated badly"),
	)
	c, err := controllertest.Init(t, serviceaccounttoken.Descriptor(o), &rest.Config{})
	if c != nil || err == nil {
		t.Fatalf("Init = %v, %v; want an error", c, err)
	}
	if want := "--service-account-private-key-file"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %s", err, want)
	}
}

// TestRunWithCancelledContext: Run returns and releases both queues (their
// goroutines) even when the term ended before it started.
func TestRunWithCancelledContext(t *testing.T) {
	o := serviceaccounttoken.NewOptions()
	o.ServiceAccountKeyFile, _ = serviceaccounttoken.WriteTestKey(t, "p256")
	controllertest.CheckRunWithCancelledContext(t, serviceaccounttoken.Descriptor(o))
}

// TestManagerFillsAndDeletesTokens: hosted by a Manager, the controller
// fills a token secret (a token signed with the key, the CA, the
// namespace, the uid annotation) and deletes it when its ServiceAccount
// goes.
func TestManagerFillsAndDeletesTokens(t *testing.T) {
	keyFile, key := serviceaccounttoken.WriteTestKey(t, "rsa")
	caFile, ca := serviceaccounttoken.WriteTestCA(t)
	o := serviceaccounttoken.NewOptions()
	o.ServiceAccountKeyFile, o.RootCAFile = keyFile, caFile
	sa := &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "builder", UID: "sa-uid"},
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "builder-token", UID: "secret-uid",
			Annotations: map[string]string{corev1.ServiceAccountNameKey: "builder"}},
		Type: corev1.SecretTypeServiceAccountToken,
	}
	h := managertest.New(t, "test", []descriptor.Descriptor{serviceaccounttoken.Descriptor(o)}, sa, secret).
		Start()
	get := func() (*corev1.Secret, error) {
		return h.Client.CoreV1().
			Secrets("ns").
			Get(t.Context(), "builder-token", metav1.GetOptions{})
	}
	var filled *corev1.Secret
	controllertest.WaitFor(t, "the token to be filled", func() bool {
		s, err := get()
		filled = s
		return err == nil && len(s.Data[corev1.ServiceAccountTokenKey]) > 0
	})
	if string(filled.Data[corev1.ServiceAccountRootCAKey]) != string(ca) ||
		string(filled.Data[corev1.ServiceAccountNamespaceKey]) != "ns" {
		t.Errorf(
			"ca.crt %q namespace %q",
			filled.Data[corev1.ServiceAccountRootCAKey],
			filled.Data[corev1.ServiceAccountNamespaceKey],
		)
	}
	if got := filled.Annotations[corev1.ServiceAccountUIDKey]; got != "sa-uid" {
		t.Errorf("uid annotation %q, want sa-uid", got)
	}
	tok, err := jwt.ParseSigned(
		string(filled.Data[corev1.ServiceAccountTokenKey]),
		[]jose.SignatureAlgorithm{jose.RS256},
	)
	if err != nil {
		t.Fatal(err)
	}
	var claims jwt.Claims
	if err := tok.Claims(key.Public(), &claims); err != nil ||
		claims.Subject != "system:serviceaccount:ns:builder" {
		t.Errorf("claims %+v, %v", claims, err)
	}

	if err := h.Client.CoreV1().ServiceAccounts("ns").Delete(t.Context(), "builder", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(
		t,
		"the token secret to be deleted with its service account",
		func() bool {
			_, err := get()
			return apierrors.IsNotFound(err)
		},
	)
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
