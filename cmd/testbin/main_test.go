package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/ctrlhost/ctrlhost/internal/testbin"
	"github.com/ctrlhost/ctrlhost/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRunWithoutBuilding(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache) // os.UserCacheDir on Linux
	t.Setenv("HOME", cache)           // and on macOS, under Library/Caches
	moduleDir := t.TempDir()
	cacheDir, err := testbin.CacheDir(testenv.KubernetesVersion)
	if err != nil {
		t.Fatal(err)
	}

	oldModule, err := testbin.ModuleOf(testbin.Minors()[0])
	if err != nil {
		t.Fatal(err)
	}
	oldVersions, err := oldModule.Versions()
	if err != nil {
		t.Fatal(err)
	}
	oldest := oldVersions.Kubernetes
	oldestCache, err := testbin.CacheDir(oldest)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		args       []string
		env        string
		wantCode   int
		wantStdout string
	}{
		{"print-version", []string{"-print-version"}, "", 0, testenv.KubernetesVersion + "\n"},
		{"print-dir defaults to the user cache", []string{"-print-dir"}, "", 0, cacheDir + "\n"},
		{
			"print-dir honours CTRLHOST_TESTBIN",
			[]string{"-print-dir"},
			"/from/env",
			0,
			"/from/env\n",
		},
		{
			"print-dir with -dir",
			[]string{"-print-dir", "-dir", "/from/flag"},
			"/from/env",
			0,
			"/from/flag\n",
		},
		{"write-module", []string{"-write-module", moduleDir}, "", 0, ""},
		{"list-minors", []string{"-list-minors"}, "", 0,
			strings.Join(testbin.Minors(), " ") + "\n"},
		{"print-version of an older minor", []string{"-minor", testbin.Minors()[0],
			"-print-version"}, "", 0, oldest + "\n"},
		{"print-dir of an older minor", []string{"-minor", testbin.Minors()[0], "-print-dir"},
			"", 0, oldestCache + "\n"},
		{"a minor outside the window", []string{"-minor", "1.20", "-print-version"}, "", 2, ""},
		{"stray argument", []string{"extra"}, "", 2, ""},
		{"unknown flag", []string{"-nope"}, "", 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(testenv.EnvTestBin, tt.env)
			var stdout, stderr bytes.Buffer
			if code := run(t.Context(), tt.args, &stdout, &stderr); code != tt.wantCode {
				t.Fatalf(
					"run(%q) = %d, want %d; stderr:\n%s",
					tt.args,
					code,
					tt.wantCode,
					stderr.String(),
				)
			}
			if stdout.String() != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", stdout.String(), tt.wantStdout)
			}
		})
	}

	got, err := os.ReadFile(filepath.Join(moduleDir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, testbin.GoMod()) ||
		!strings.Contains(string(got), "k8s.io/kubernetes "+testenv.KubernetesVersion) {
		t.Errorf("-write-module wrote a go.mod other than the embedded one:\n%s", got)
	}
}
