package bootstraptoken

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func secret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name},
		Type: SecretType, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func signing(overrides map[string]string) map[string]string {
	d := map[string]string{IDKey: "abcdef", SecretKey: "0123456789abcdef", UsageSigning: "true"}
	for k, v := range overrides {
		if v == "-" {
			delete(d, k)
		} else {
			d[k] = v
		}
	}
	return d
}

func TestExpiry(t *testing.T) {
	tests := []struct {
		name        string
		expiration  string // "": no key
		wantLeft    time.Duration
		wantExpires bool
		wantErr     bool
	}{
		{"no expiration", "", 0, false, false},
		{"in an hour", now.Add(time.Hour).Format(time.RFC3339), time.Hour, true, false},
		{"an hour ago", now.Add(-time.Hour).Format(time.RFC3339), -time.Hour, true, false},
		{"unparsable", "next tuesday", 0, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := map[string]string{}
			if tt.expiration != "" {
				d[ExpirationKey] = tt.expiration
			}
			left, expires, err := Expiry(secret("bootstrap-token-abcdef", d), now)
			if left != tt.wantLeft || expires != tt.wantExpires || (err != nil) != tt.wantErr {
				t.Errorf("Expiry = %v, %v, %v; want %v, %v, error %v",
					left, expires, err, tt.wantLeft, tt.wantExpires, tt.wantErr)
			}
		})
	}
}

func TestForSigning(t *testing.T) {
	hour := now.Add(time.Hour).Format(time.RFC3339)
	tests := []struct {
		name    string
		secret  *corev1.Secret
		want    Signer
		wantErr string // a substring of the error; "": none
	}{
		{"signing token", secret("bootstrap-token-abcdef", signing(nil)),
			Signer{ID: "abcdef", Secret: "0123456789abcdef"}, ""},
		{"expires later", secret("bootstrap-token-abcdef", signing(map[string]string{
			ExpirationKey: hour})),
			Signer{ID: "abcdef", Secret: "0123456789abcdef", Expires: true, Left: time.Hour}, ""},
		{"expired", secret("bootstrap-token-abcdef", signing(map[string]string{
			ExpirationKey: now.Format(time.RFC3339)})), Signer{}, "expired at"},
		{"unparsable expiration", secret("bootstrap-token-abcdef", signing(map[string]string{
			ExpirationKey: "soon"})), Signer{}, "treated as expired"},
		{"not for signing", secret("bootstrap-token-abcdef", signing(map[string]string{
			UsageSigning: "false"})), Signer{}, "not a signing token"},
		{"no usage", secret("bootstrap-token-abcdef", signing(map[string]string{
			UsageSigning: "-"})), Signer{}, "not a signing token"},
		{"bad name", secret("bootstrap-token-ABCDEF", signing(nil)), Signer{}, "is not bootstrap"},
		{"other name", secret("token-abcdef", signing(nil)), Signer{}, "is not bootstrap"},
		{"no id", secret("bootstrap-token-abcdef", signing(map[string]string{IDKey: "-"})),
			Signer{}, `"token-id" is missing`},
		{"id differs from the name", secret("bootstrap-token-abcdef",
			signing(map[string]string{IDKey: "ghijkl"})), Signer{}, "the name says"},
		{"no secret", secret("bootstrap-token-abcdef", signing(map[string]string{
			SecretKey: ""})), Signer{}, `"token-secret" is missing`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ForSigning(tt.secret, now)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("ForSigning error %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("ForSigning error %v, want one containing %q", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ForSigning = %+v, want %+v", got, tt.want)
			}
		})
	}
	s := secret("bootstrap-token-abcdef", signing(map[string]string{UsageSigning: "yes"}))
	if _, err := ForSigning(s, now); !errors.Is(err, ErrNotSigning) {
		t.Errorf("ForSigning error %v, want ErrNotSigning", err)
	}
}
