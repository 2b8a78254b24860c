package flagprefix

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
)

func janitor() Renamer {
	return Renamer{Prefix: "janitor-", Names: func() map[string]bool {
		return map[string]bool{"secure-port": true, "controllers": true, "profiling": true,
			"client-ca-file": true}
	}}
}

func TestRenamesOnlyTheNamedFlagsAsWholeWords(t *testing.T) {
	for _, tc := range []struct {
		in, text, help string
	}{
		{"--secure-port=0", "--janitor-secure-port=0", "--janitor-secure-port=0"},
		{"set --controllers or --v", "set --janitor-controllers or --v", "set --janitor-controllers or --v"},
		{"--insecure-port", "--insecure-port", "--insecure-port"},
		{"--secure-port-x", "--secure-port-x", "--secure-port-x"},
		{"the client-ca-file", "the client-ca-file", "the janitor-client-ca-file"},
		{"enable profiling", "enable profiling", "enable profiling"},
		// A value quoted in a message is left alone; in a help text the
		// bare name is renamed wherever it stands (the package doc says so).
		{"/etc/client-ca-file --profiling", "/etc/client-ca-file --janitor-profiling",
			"/etc/janitor-client-ca-file --janitor-profiling"},
	} {
		r := janitor()
		if got := r.Text(tc.in); got != tc.text {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.text)
		}
		if got := r.Help(tc.in); got != tc.help {
			t.Errorf("Help(%q) = %q, want %q", tc.in, got, tc.help)
		}
	}
	if got := (Renamer{}).Text("--secure-port"); got != "--secure-port" {
		t.Errorf("without a prefix: %q", got)
	}
}

func TestARenamedErrorUnwrapsToTheOriginal(t *testing.T) {
	cause := errors.New("--controllers: no such controller")
	err := janitor().Err(fmt.Errorf("build: %w", cause))
	if err.Error() != "build: --janitor-controllers: no such controller" {
		t.Errorf("Err = %q", err)
	}
	if !errors.Is(err, cause) {
		t.Error("the renamed error does not unwrap to its cause")
	}
	plain := errors.New("nothing to rename")
	if janitor().Err(plain) != plain {
		t.Error("an error naming no flag was wrapped")
	}
}

func TestTheLoggerRenamesMessagesValuesAndErrors(t *testing.T) {
	var lines []string
	l := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	log := janitor().Logger(l).WithValues("hint", "set --secure-port")
	log.Info("serving off: --secure-port=0", "flag", "--controllers", "key-with--controllers", 1)
	log.Error(errors.New("bad --controllers"), "failed")
	got := strings.Join(lines, "\n")
	for _, want := range []string{`"msg"="serving off: --janitor-secure-port=0"`,
		`"hint"="set --janitor-secure-port"`, `"flag"="--janitor-controllers"`,
		`"key-with--controllers"=1`, `"error"="bad --janitor-controllers"`} {
		if !strings.Contains(got, want) {
			t.Errorf("log lines lack %s:\n%s", want, got)
		}
	}
}
