package manager_test

import (
	"fmt"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
)

// TestPrefixedManagerNamesItsOwnFlags: the second Manager of a program
// takes its flags under a prefix (--janitor-controllers); Build's errors,
// the warnings and the log lines name them so, not under KCM's names,
// which are the first Manager's. The process's flags keep their names.
func TestPrefixedManagerNamesItsOwnFlags(t *testing.T) {
	proc, janitor := manager.NewOptions(), manager.NewOptions()
	fs := pflag.NewFlagSet("pair", pflag.ContinueOnError)
	proc.AddProcessFlags(fs)
	janitor.AddManagerFlags(fs, "janitor-")
	err := fs.Parse([]string{"--janitor-controller-start-interval=-1s",
		"--janitor-leader-elect-renew-deadline=20s", "--janitor-tls-cert-file=/x.pem",
		"--janitor-controllers=*,-nope", "--feature-gates=NoSuchGate=true"})
	if err != nil {
		t.Fatal(err)
	}
	janitor.ShareProcess(proc)
	build := func(o manager.Options, log *lines) (*manager.Manager, error) {
		meta := metadatafake.NewSimpleMetadataClient(runtime.NewScheme())
		return manager.NewBuilder("pod-janitor").WithOptions(o).WithLogger(log.logger()).
			WithClient(fake.NewClientset(), meta).
			Register(descriptor.New("x-controller", nop)).Build()
	}
	_, err = build(janitor, &lines{})
	if err == nil {
		t.Fatal("Build succeeded")
	}
	msg := err.Error()
	for _, want := range []string{
		"--janitor-controller-start-interval: must not be negative",
		"--janitor-leader-elect-renew-deadline",
		"--janitor-tls-cert-file and --janitor-tls-private-key-file: set both or neither",
		`--janitor-controllers: "nope"`,
		"--feature-gates: unknown gate(s) NoSuchGate", // the process's, unprefixed
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("Build error does not say %q:\n%s", want, msg)
		}
	}
	for _, kcm := range []string{"--controller-start-interval", "--leader-elect-renew-deadline",
		"--tls-cert-file", "--controllers"} {
		if hasFlag(msg, kcm) {
			t.Errorf("Build error names %s, the first Manager's flag:\n%s", kcm, msg)
		}
	}

	// A Manager that builds logs its warnings and serving's lines so too.
	janitor.ControllerStartInterval, janitor.LeaderElection.RenewDeadline = 0, 0
	janitor.Serving.CertFile, janitor.Controllers, janitor.FeatureGates = "", nil, nil
	janitor.LeaderElect, janitor.Sharding.Enabled, janitor.Serving.SecurePort = false, true, 0
	log := &lines{}
	m, err := build(janitor, log)
	if err != nil {
		t.Fatal(err)
	}
	text := log.String()
	for _, want := range []string{
		"--janitor-enable-sharding is ignored: sharding needs --janitor-leader-elect=true",
		"--janitor-secure-port=0",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the log does not say %q:\n%s", want, text)
		}
	}
	for _, kcm := range []string{"--enable-sharding", "--leader-elect", "--secure-port"} {
		if hasFlag(text, kcm) {
			t.Errorf("the log names %s, the first Manager's flag:\n%s", kcm, text)
		}
	}

	// /flagz, without WithFlags, shows the Manager's options so too.
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/flagz", nil))
	if body := rec.Body.String(); !strings.Contains(body, "janitor-enable-sharding") ||
		!strings.Contains(body, "kubeconfig") || hasFlag(body, "enable-sharding") {
		t.Errorf("/flagz does not show the janitor's flags as typed:\n%s", body)
	}

	// Options filled in code (no flags) keep KCM's names.
	plain := manager.Options{ControllerStartInterval: -1}
	if _, err := build(plain, &lines{}); err == nil ||
		!strings.Contains(err.Error(), "--controller-start-interval: must not be negative") {
		t.Errorf("Build of Options without flags: %v", err)
	}
}

// hasFlag reports whether text names flag (such as "--secure-port") as a
// whole flag name, not as the tail of a longer one.
func hasFlag(text, flag string) bool {
	return regexp.MustCompile(`(^|[^a-z0-9-])` + regexp.QuoteMeta(flag) + `($|[^a-z0-9-])`).
		MatchString(text)
}

// lines collects a logger's lines.
type lines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		fmt.Fprintln(&l.b, prefix, args)
	}, funcr.Options{})
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// flagRefs finds what names a flag in a help text: "--name", or a
// hyphenated name on its own ("the client-ca-file") that is the name of
// one of known's flags.
func flagRefs(usage string, known map[string]bool) []string {
	var out []string
	re := regexp.MustCompile(`(--)?[a-z0-9]+(-[a-z0-9]+)*`)
	for _, loc := range re.FindAllStringIndex(usage, -1) {
		i, j := loc[0], loc[1]
		if i > 0 && isNameByte(usage[i-1]) || j < len(usage) && isNameByte(usage[j]) {
			continue
		}
		ref := usage[i:j]
		if name, ok := strings.CutPrefix(ref, "--"); ok {
			out = append(out, name)
		} else if strings.Contains(ref, "-") && known[ref] {
			out = append(out, ref)
		}
	}
	return out
}

func isNameByte(c byte) bool {
	return c == '-' || c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' ||
		'0' <= c && c <= '9'
}

// TestPrefixedHelpNamesFlagsOfItsSet: a help text that names another
// flag names it as the reader types it: --ccm-secure-port's neighbours
// say --ccm-secure-port, not --secure-port (the other Manager's, or no
// flag at all). Every flag of a prefixed set is walked.
func TestPrefixedHelpNamesFlagsOfItsSet(t *testing.T) {
	known := map[string]bool{}
	all := pflag.NewFlagSet("all", pflag.ContinueOnError)
	everything := manager.NewOptions()
	everything.AddFlags(all)
	all.VisitAll(func(f *pflag.Flag) { known[f.Name] = true })
	for _, prefix := range []string{"", "ccm-", "janitor-"} {
		proc, o := manager.NewOptions(), manager.NewOptions()
		fs := pflag.NewFlagSet(prefix, pflag.ContinueOnError)
		proc.AddProcessFlags(fs)
		o.AddManagerFlags(fs, prefix)
		refs := 0
		fs.VisitAll(func(f *pflag.Flag) {
			for _, ref := range flagRefs(f.Usage, known) {
				refs++
				if fs.Lookup(ref) == nil {
					t.Errorf("prefix %q: --%s's help names %s, which is no flag of its set: %q",
						prefix, f.Name, ref, f.Usage)
				}
			}
		})
		if refs < 10 {
			t.Errorf("prefix %q: %d references to other flags found; the walk finds none", prefix,
				refs)
		}
	}
}
