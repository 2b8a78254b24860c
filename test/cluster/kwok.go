//go:build unix

package cluster

import (
	"bytes"
	_ "embed"
	"fmt"
	"strings"
	"text/template"
)

// NodeAnnotation marks the nodes kwok manages (kwok's own convention);
// Start creates every node with it and runs kwok with a selector for it.
const NodeAnnotation = "kwok.x-k8s.io/node"

//go:embed stages.yaml
var stagesTemplate string

// programClass is a jq expression over a pod that says what its
// containers would do if run, judged from their command lines as upstream's
// e2e fixtures write them: "random" (exits 0 or 1 at random), "succeed",
// "fail", or "forever" (a server, a sleep, a pause image with no command
// line: upstream's notTerminate Jobs). A Job's pod with no command line of
// its own and another image succeeds, as kwok's own stages have it; any
// other runs until deleted. A completion-indexed script that fails odd
// indexes is judged by the pod's index.
const programClass = `(
  [.spec.containers[] | (.command // []) + (.args // []) | join(" ")] | join(" ; ")
) as $s
| ([.metadata.ownerReferences[]? | select(.controller == true) | .kind] | first // "") as $owner
| if ($s | test("RANDOM")) then "random"
  elif ($s | test("% 2")) then
    (if (((.metadata.annotations // {})["batch.kubernetes.io/job-completion-index"] // "0")
      | tonumber) % 2 == 1 then "fail" else "succeed" end)
  elif ($s | test("sleep|while true")) then "forever"
  elif ($s == "" and ([.spec.containers[].image] | any(test("/pause:")))) then "forever"
  elif ($s | test("exit [1-9]|/bin/false")) and ($s | test("exit 0") | not) then "fail"
  elif ($s | test("exit 0|/bin/true")) then "succeed"
  elif $owner == "Job" then "succeed"
  else "forever" end`

// badImage is a jq expression that is true when a pod names an image
// that cannot be pulled, as upstream's e2e tests name one to keep a
// rollout from finishing (":404", ":non-existent", ":nonexistent").
const badImage = `[.spec.containers[].image | test(":(404|non-existent|nonexistent)$")] | any`

// renderStages returns kwok's stage configuration (stages.yaml) for nodes
// that report kubeletVersion.
func renderStages(kubeletVersion, kwokVersion string) ([]byte, error) {
	t, err := template.New("stages.yaml").Delims("[[", "]]").Parse(stagesTemplate)
	if err != nil {
		return nil, fmt.Errorf("cluster: stages.yaml: %w", err)
	}
	oneLine := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	var b bytes.Buffer
	err = t.Execute(&b, map[string]string{
		"Program":        oneLine(programClass),
		"BadImage":       badImage,
		"KubeletVersion": kubeletVersion,
		"KwokVersion":    kwokVersion,
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: stages.yaml: %w", err)
	}
	return b.Bytes(), nil
}
