package sharedflag

import (
	"strings"
	"testing"
	"time"

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

func TestBoolAndDurationShareOneFlag(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		wantBool bool
		wantDur  time.Duration
	}{
		{"set", []string{"--allocate-node-cidrs", "--node-monitor-period=7s"}, true,
			7 * time.Second},
		{"set false", []string{"--allocate-node-cidrs=false"}, false, 5 * time.Second},
		{"not set", nil, false, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			var a, b bool
			da, db := 5*time.Second, time.Second // the first caller's default wins
			Bool(fs, &a, "allocate-node-cidrs", "")
			Duration(fs, &da, "node-monitor-period", "")
			Bool(fs, &b, "allocate-node-cidrs", "")
			Duration(fs, &db, "node-monitor-period", "")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if a != tc.wantBool || b != tc.wantBool {
				t.Errorf("bools %v, %v; want %v each", a, b, tc.wantBool)
			}
			if da != tc.wantDur || db != tc.wantDur {
				t.Errorf("durations %v, %v; want %v each", da, db, tc.wantDur)
			}
		})
	}
}

func TestTypesThatCannotShareRefuseTheFlag(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	var s string
	var b bool
	String(fs, &s, "cluster-cidr", "")
	Bool(fs, &b, "cluster-cidr", "")
	err := fs.Parse([]string{"--cluster-cidr=10.0.0.0/8"})
	want := "--cluster-cidr is registered twice, as a string and as a bool"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("parse error %v, want one naming the flag and both types", err)
	}
}
