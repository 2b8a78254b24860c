package sharedflag

import (
	"testing"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStringSharesOneFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"set on the command line", []string{"--root-ca-file=/ca.pem"}, "/ca.pem"},
		{"set twice, the last wins", []string{"--root-ca-file=/a", "--root-ca-file=/b"}, "/b"},
		{"not set", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			var a, b, c string
			String(fs, &a, "root-ca-file", "the CA")
			String(fs, &b, "root-ca-file", "ignored")
			String(fs, &c, "root-ca-file", "ignored")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if a != tc.want || b != tc.want || c != tc.want {
				t.Errorf("got %q, %q, %q; want %q each", a, b, c, tc.want)
			}
			if u := fs.Lookup("root-ca-file").Usage; u != "the CA" {
				t.Errorf("usage %q, want the first caller's", u)
			}
		})
	}
}

func TestStringLaterCallerStartsWithTheValue(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	a := "/default.pem"
	String(fs, &a, "root-ca-file", "")
	var b string
	String(fs, &b, "root-ca-file", "")
	if b != "/default.pem" {
		t.Errorf("later caller got %q, want the flag's current value", b)
	}
}
