// Package gobuild compiles a test's helper program (a replica, an operator)
// once per test binary, for tests that run it as separate processes.
//
// Guarantees: the program is built at most once per Program, by the first
// test that asks; every later caller gets the same path or the same error.
// The binary goes to one directory per package, test directory and race
// mode under os.TempDir()/ctrlhost-gobuild, rebuilt in place by every run,
// so repeated runs do not pile up binaries (a fresh temporary directory per
// run left 180 MB behind each time for a program importing
// k8s.io/kubernetes).
// Non-guarantees: two test binaries of the same package run at once would
// build into the same place.
package gobuild

import (
	"crypto/sha256"
	"encoding/hex"
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

// dir is where p's binary goes: named by its package, and by a hash of the
// test's working directory, the package and the race mode.
func (p *Program) dir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%v", wd, p.pkg, p.race))
	dir := filepath.Join(os.TempDir(), "ctrlhost-gobuild", filepath.Base(p.pkg)+"-"+
		hex.EncodeToString(sum[:6]))
	return dir, os.MkdirAll(dir, 0o755)
}

// Path builds the program the first time it is called and returns the
// binary's path, failing tb if the build failed.
func (p *Program) Path(tb testing.TB) string {
	tb.Helper()
	p.once.Do(func() {
		dir, err := p.dir()
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
