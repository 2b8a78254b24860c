//go:build unix

package cluster

import (
	"testing"

	"github.com/itchyny/gojq"
)

// TestProgramClass: kwok judges what a pod's containers would do from
// their command lines as upstream's e2e fixtures write them. A Job's pod
// of the pause image with no command line runs until deleted (upstream's
// notTerminate Jobs: judged "succeed", their pods ended after 1 to 3 s and
// "Job should adopt matching orphans" waited for two running pods that had
// finished).
func TestProgramClass(t *testing.T) {
	q, err := gojq.Parse(programClass)
	if err != nil {
		t.Fatal(err)
	}
	code, err := gojq.Compile(q)
	if err != nil {
		t.Fatal(err)
	}
	jobPod := func(image string, command ...any) map[string]any {
		c := map[string]any{"image": image}
		if command != nil {
			c["command"] = command
		}
		return map[string]any{
			"metadata": map[string]any{"ownerReferences": []any{
				map[string]any{"kind": "Job", "controller": true}}},
			"spec": map[string]any{"containers": []any{c}},
		}
	}
	for _, tc := range []struct {
		name string
		pod  map[string]any
		want string
	}{
		{"pause image, no command", jobPod("registry.k8s.io/pause:3.10.2"), "forever"},
		{"busybox, no command", jobPod("registry.k8s.io/e2e-test-images/busybox:1.37.0-1"), "succeed"},
		{"exit 1", jobPod("busybox", "/bin/sh", "-c", "exit 1"), "fail"},
		{"exit 0", jobPod("busybox", "/bin/sh", "-c", "exit 0"), "succeed"},
		{"sleep", jobPod("busybox", "sleep", "1000000"), "forever"},
		{"random", jobPod("busybox", "/bin/sh", "-c", "exit $(( $RANDOM / 16384 ))"), "random"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := code.Run(tc.pod).Next()
			if !ok {
				t.Fatal("no result")
			}
			if err, isErr := v.(error); isErr {
				t.Fatal(err)
			}
			if v != tc.want {
				t.Errorf("program class %v, want %s", v, tc.want)
			}
		})
	}
}
