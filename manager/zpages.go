package manager

import (
	"net/http"
	"runtime/debug"
	"time"

	"github.com/spf13/pflag"

	"github.com/ctrlhost/ctrlhost/internal/zpages"
)

// The z-pages KCM v1.37 serves by default; every Manager serves them,
// authorized as /metrics is (internal/zpages).
const (
	statuszPath = zpages.StatuszPath
	flagzPath   = zpages.FlagzPath
)

// zpageHandlers are a Manager's /statusz and /flagz.
type zpageHandlers struct {
	statusz, flagz http.Handler
}

// zpages builds m's z-pages: /statusz with the time of Build as its start,
// /flagz with WithFlags' flag sets, or else m's own options under their
// flag names (with the prefix AddManagerFlags bound them under).
func (b *Builder) zpages(m *Manager) zpageHandlers {
	version := b.version
	if version == "" {
		version = "unknown"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
			version = bi.Main.Version
		}
	}
	paths := []string{"/healthz", "/livez", "/readyz", "/metrics", debugPrefix, statuszPath,
		flagzPath}
	if m.opts.Serving.Profiling {
		paths = append(paths, "/debug/pprof/")
	}
	status := zpages.Status{Component: m.component, Start: time.Now(), BinaryVersion: version,
		Paths: func() []string { return paths }}
	sets := b.flags
	if len(sets) == 0 {
		// Under the names its user types: a Manager whose flags were
		// bound with a prefix shows them with it.
		own := m.opts
		fs := pflag.NewFlagSet(m.component, pflag.ContinueOnError)
		own.AddProcessFlags(fs)
		own.AddManagerFlags(fs, own.flagPrefix)
		sets = []*pflag.FlagSet{fs}
	}
	return zpageHandlers{
		statusz: zpages.Statusz(status),
		flagz: zpages.Flagz(m.component, func() map[string]string {
			return zpages.FlagValues(sets...)
		}),
	}
}
