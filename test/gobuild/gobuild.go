// Package gobuild compiles a test's helper program (a replica, an operator)
// once per test binary, for tests that run it as separate processes.
//
// Guarantees: the program is built at most once per Program, by the first
// test that asks; every later caller gets the same path or the same error.
// Non-guarantees: the binary's temporary directory is not removed.
package gobuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Program is one package to build.
type Program struct {
	pkg  string // as go build takes it, e.g. "./replica"
	race bool   // build with -race
	once sync.Once
	path string
	err  error
}

// New returns a Program for pkg, relative to the test's working directory.
func New(pkg string) *Program { return &Program{pkg: pkg} }

// RaceLikeTest makes p build with -race when the test binary was built with
// it, and returns p. The program then shares the test's compiled packages
// (a large program, such as one importing k8s.io/kubernetes, is not compiled
// twice) and its data races are reported too. Call it before Path.
func (p *Program) RaceLikeTest() *Program {
	p.race = raceEnabled
	return p
}

// Path builds the program the first time it is called and returns the
// binary's path, failing tb if the build failed.
func (p *Program) Path(tb testing.TB) string {
	tb.Helper()
	p.once.Do(func() {
		dir, err := os.MkdirTemp("", "ctrlhost-"+filepath.Base(p.pkg)+"-")
		if err != nil {
			p.err = err
			return
		}
		p.path = filepath.Join(dir, filepath.Base(p.pkg))
		args := []string{"build", "-o", p.path}
		if p.race {
			args = append(args, "-race")
		}
		if out, err := exec.Command("go", append(args, p.pkg)...).CombinedOutput(); err != nil {
			p.err = fmt.Errorf("go build %s: %v\n%s", p.pkg, err, out)
		}
	})
	if p.err != nil {
		tb.Fatal(p.err)
	}
	return p.path
}
