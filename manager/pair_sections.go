package manager

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
)

// FlagSections are flags in named sections, in order, for a --help that
// groups them as kube-controller-manager's does ("Generic flags:",
// "Secure serving flags:", ...) instead of listing every flag of every
// Manager in one run. They have the two fields of
// k8s.io/component-base/cli/flag.NamedFlagSets: a cobra program passes
// cliflag.NamedFlagSets{Order: s.Order, FlagSets: s.FlagSets} to
// cliflag.SetUsageAndHelpFunc.
//
// Options.AddFlagSections, AddProcessFlagSections and
// AddManagerFlagSections fill them as AddFlags, AddProcessFlags and
// AddManagerFlags add flags (the same flags, names, defaults and help);
// a program adds sections of its own with FlagSet, parses one flag set
// that AddTo fills, and prints its help with Print.
type FlagSections struct {
	// Order lists the sections' names, in the order they were made.
	Order []string
	// FlagSets are the sections, by name.
	FlagSets map[string]*pflag.FlagSet
}

// FlagSet returns the section called name, made (last in Order) if
// there is none yet.
func (s *FlagSections) FlagSet(name string) *pflag.FlagSet {
	if s.FlagSets == nil {
		s.FlagSets = map[string]*pflag.FlagSet{}
	}
	fs, ok := s.FlagSets[name]
	if !ok {
		fs = pflag.NewFlagSet(name, pflag.ContinueOnError)
		s.FlagSets[name] = fs
		s.Order = append(s.Order, name)
	}
	return fs
}

// AddTo adds every section's flags to fs, the flag set the program
// parses. A flag fs has already panics, as pflag's AddFlag does (pflag's
// AddFlagSet would drop it in silence).
func (s *FlagSections) AddTo(fs *pflag.FlagSet) {
	for _, name := range s.Order {
		s.FlagSets[name].VisitAll(fs.AddFlag)
	}
}

// Print writes every section that has a flag to show, in order, as
// KCM's --help does: a "<Name> flags:" title and its flags' help, with
// lines wrapped at cols columns (0: not wrapped).
func (s *FlagSections) Print(w io.Writer, cols int) {
	for _, name := range s.Order {
		fs := s.FlagSets[name]
		if name == "" || !fs.HasAvailableFlags() {
			continue
		}
		fmt.Fprintf(w, "\n%s flags:\n\n%s", strings.ToUpper(name[:1])+name[1:],
			fs.FlagUsagesWrapped(cols))
	}
}

// The sections of Options' flags, in the order they are made. The names
// are KCM's where KCM has the section (leader election has one of its
// own here; KCM lists it under generic).
var flagSectionOrder = []string{"generic", "leader election", "leader-migration", "sharding",
	"secure serving", "authentication", "authorization", "debugging", "logs", "misc"}

// flagSectionNames says which section each flag of AddFlags is in, but
// for the logging flags (section "logs", asked from logging.Options).
var flagSectionNames = map[string][]string{
	"generic": {"controllers", "controller-start-interval", "controller-shutdown-timeout",
		"min-resync-period", "use-service-account-credentials", "cloud-provider",
		"cloud-config", "kube-api-qps", "kube-api-burst", "kube-api-content-type",
		"feature-gates"},
	"leader election": {"leader-elect", "leader-elect-lease-duration",
		"leader-elect-renew-deadline", "leader-elect-retry-period",
		"leader-elect-resource-lock", "leader-elect-resource-name",
		"leader-elect-resource-namespace", "leader-elect-warm-standby",
		"leader-elect-lost-lease-policy"},
	"leader-migration": {"enable-leader-migration", "leader-migration-config"},
	"sharding":         {"enable-sharding", "shard-slots"},
	"secure serving": {"bind-address", "secure-port", "tls-cert-file", "tls-private-key-file",
		"cert-dir", "tls-min-version", "tls-cipher-suites", "permit-address-sharing",
		"disable-serving-auth"},
	"authentication": {"authentication-kubeconfig", "authentication-skip-lookup",
		"authentication-tolerate-lookup-failure", "authentication-token-webhook-cache-ttl",
		"client-ca-file", "requestheader-client-ca-file", "requestheader-allowed-names",
		"requestheader-username-headers", "requestheader-uid-headers",
		"requestheader-group-headers", "requestheader-extra-headers-prefix"},
	"authorization": {"authorization-kubeconfig", "authorization-always-allow-paths",
		"authorization-webhook-cache-authorized-ttl",
		"authorization-webhook-cache-unauthorized-ttl"},
	"debugging": {"profiling"},
	"misc":      {"kubeconfig", "master"},
}

// flagSection is the section of the flag AddFlags names name, logging
// naming the logging flags; ok is false for a flag no section lists, put
// in generic.
func flagSection(name string, logging map[string]bool) (section string, ok bool) {
	if logging[name] {
		return "logs", true
	}
	for section, names := range flagSectionNames {
		for _, n := range names {
			if n == name {
				return section, true
			}
		}
	}
	return "generic", false
}

// AddFlagSections is AddFlags with each flag in its section of s (made if
// missing): "generic", "leader election", "secure serving", ...
func (o *Options) AddFlagSections(s *FlagSections) {
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	o.AddFlags(fs)
	s.add(fs, "")
}

// AddProcessFlagSections is AddProcessFlags with each flag in its section
// of s: "generic", "logs" and "misc". These are the sections the
// unprefixed Manager's flags go in too.
func (o *Options) AddProcessFlagSections(s *FlagSections) {
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	o.AddProcessFlags(fs)
	s.add(fs, "")
}

// AddManagerFlagSections is AddManagerFlags (o remembers the prefix) with
// each flag in its section of s. Under a prefix the sections' names say
// it: "generic (--janitor-*)", "leader election (--janitor-*)", so that
// the help of two Managers shows each one's sections apart.
func (o *Options) AddManagerFlagSections(s *FlagSections, prefix string) {
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	o.AddManagerFlags(fs, prefix)
	s.add(fs, prefix)
}

// add puts fs's flags, each named prefix and a flag of AddFlags, in their
// sections of s, making those missing in flagSectionOrder.
func (s *FlagSections) add(fs *pflag.FlagSet, prefix string) {
	in := map[string][]*pflag.Flag{}
	logging := loggingFlags()
	fs.VisitAll(func(f *pflag.Flag) {
		section, _ := flagSection(strings.TrimPrefix(f.Name, prefix), logging)
		in[section] = append(in[section], f)
	})
	for _, section := range flagSectionOrder {
		if len(in[section]) == 0 {
			continue
		}
		name := section
		if prefix != "" {
			name += " (--" + prefix + "*)"
		}
		set := s.FlagSet(name)
		for _, f := range in[section] {
			set.AddFlag(f)
		}
	}
}
