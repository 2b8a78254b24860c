package conformance

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseReport(t *testing.T) {
	got, err := ParseReport("testdata/report.json")
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{
		{Name: "[sig-apps] Deployment deployment should support rollover [Conformance]",
			Outcome: Passed, Elapsed: 21 * time.Second},
		{Name: "[sig-apps] Job should run a job to completion when tasks succeed", Outcome: Failed,
			Reason: "failed to ensure job completion in namespace: job-1 / Unexpected error: / " +
				"<*errors.errorString ¦ 0xc000>: / timed out / occurred",
			Where: "test/e2e/apps/job.go:123", Elapsed: 5 * time.Second},
		{Name: "[sig-apps] Daemon set [Serial] should run and stop simple daemon | ok",
			Outcome: Skipped, Reason: "Requires at least 2 nodes (not 1)",
			Where: "test/e2e/apps/daemon_set.go:7"},
		{Name: "[sig-apps] StatefulSet should time out", Outcome: Failed,
			Reason: "timedout: A suite timeout occurred", Where: "statefulset.go:9"},
		{Name: "[sig-apps] ReplicaSet should panic", Outcome: Failed,
			Reason: "panicked: panic: runtime error: index out of range", Where: "rs.go:3"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d results, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("result %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

func TestParseReportSuiteFailure(t *testing.T) {
	got, err := ParseReport("testdata/suite-failed.json")
	var suite *SuiteError
	if !errors.As(err, &suite) || !strings.Contains(err.Error(), "SynchronizedBeforeSuite: "+
		"Error waiting for all pods") {
		t.Fatalf("err = %v, want a SuiteError naming the SynchronizedBeforeSuite", err)
	}
	if len(got) != 1 || got[0].Outcome != Skipped {
		t.Errorf("results = %+v, want the one test skipped", got)
	}
	if _, err := ParseReport("testdata/none.json"); err == nil {
		t.Error("no error for a missing report")
	}
}

func TestOneLine(t *testing.T) {
	long := strings.Repeat("é", 300)
	if got := oneLine(long, 10); got != strings.Repeat("é", 9)+"…" {
		t.Errorf("oneLine cut to %q", got)
	}
	if got := oneLine("a\n\n  b | c\n", 100); got != "a / b ¦ c" {
		t.Errorf("oneLine = %q", got)
	}
}

func TestTable(t *testing.T) {
	p := func(n string) Result { return Result{Name: n, Outcome: Passed} }
	f := func(n, why string) Result { return Result{Name: n, Outcome: Failed, Reason: why} }
	s := func(n string) Result { return Result{Name: n, Outcome: Skipped, Reason: "no zones"} }
	results := map[string][]Result{
		"upstream": {p("a [Conformance]"), p("b"), f("c needs exec", "no exec"), s("d"), p("e")},
		"native":   {p("a [Conformance]"), f("b", "timed out"), s("d"), {Name: "e", Outcome: NotRun, Reason: "preflight"}},
		"dropin":   {p("a [Conformance]"), p("b"), f("c needs exec", "no exec"), s("d"), p("e"), p("x")},
	}
	tb := NewTable([]string{"upstream", "native", "dropin"}, results)
	if got := names(tb.Rows); !slices.Equal(got, []string{"a [Conformance]", "b", "d", "e"}) {
		t.Errorf("rows %v", got)
	}
	if len(tb.NotApplicable) != 1 || tb.NotApplicable[0].Name != "c needs exec" {
		t.Errorf("not applicable %+v", tb.NotApplicable)
	}
	if !slices.Equal(tb.Unjudged, []string{"x"}) {
		t.Errorf("unjudged %v", tb.Unjudged)
	}
	wantDefects := []Defect{
		{Name: "b", Side: "native", Want: Passed, Got: Failed, Reason: "timed out"},
		{Name: "e", Side: "native", Want: Passed, Got: NotRun, Reason: "preflight"},
	}
	if !slices.Equal(tb.Defects, wantDefects) {
		t.Errorf("defects\n got %+v\nwant %+v", tb.Defects, wantDefects)
	}
	for side, want := range map[string]Count{
		"upstream": {Ran: 3, Passed: 3, Skipped: 1},
		"native":   {Ran: 2, Passed: 1, Failed: 1, Skipped: 1, NotRun: 1},
		"dropin":   {Ran: 3, Passed: 3, Skipped: 1},
	} {
		if got := tb.Count(side); got != want {
			t.Errorf("%s: %+v, want %+v", side, got, want)
		}
	}
	md := tb.Markdown()
	for _, want := range []string{
		"| native | 2 | 1 | 1 | 1 | 1 |",
		"| b | pass | fail | pass | native: timed out |",
		"| d | skip | skip | skip | upstream, native, dropin: no zones |",
		"| c needs exec | no exec |",
		"| e | native | pass | - | preflight |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the table lacks %q:\n%s", want, md)
		}
	}
}

func names(rows []Row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.Name)
	}
	return out
}

// A sample of e2e.test's names (v1.37.1), for the sets.
var sampleNames = []string{
	"[sig-apps] Deployment RollingUpdateDeployment should delete old pods and create new ones [Conformance]",
	"[sig-apps] Job should run a job to completion when tasks succeed",
	"[sig-api-machinery] Garbage collector should delete pods created by rc when not orphaning [Conformance]",
	"[sig-api-machinery] ResourceQuota should create a ResourceQuota and capture the life of a pod. [Conformance]",
	"[sig-network] EndpointSlice should create Endpoints and EndpointSlices for Pods matching a Service [Conformance]",
	"[sig-auth] ServiceAccounts should guarantee kube-root-ca.crt exist in any namespace [Conformance]",
	"[sig-apps] Daemon set [Serial] should rollback without unnecessary restarts [Conformance]",
	"[sig-apps] StatefulSet Deploy clustered applications should creating a working CockroachDB cluster [Slow]",
	"[sig-apps] DaemonRestart [Provider:gce,aws,local,azure] Kubelet should not restart containers across restart [Disruptive]",
	"[sig-node] NoExecuteTaintManager Single Pod removing taint cancels eviction [Conformance] [Disruptive] [Serial]",
	"[sig-network] Services should serve a basic endpoint from pods [Conformance]",
	"[sig-apps] Job should run a job to completion when tasks succeed in a gang [Alpha]",
}

func TestSets(t *testing.T) {
	smoke, err := SetByName("smoke")
	if err != nil {
		t.Fatal(err)
	}
	got, err := smoke.Select(sampleNames)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 || slices.ContainsFunc(got, func(n string) bool { return strings.Contains(n, "gang") }) {
		t.Errorf("smoke selects %q, want its six tests exactly", got)
	}
	full, _ := SetByName("full")
	got, _ = full.Select(sampleNames)
	for _, out := range []string{"CockroachDB", "DaemonRestart", "Services", "[Alpha]"} {
		if slices.ContainsFunc(got, func(n string) bool { return strings.Contains(n, out) }) {
			t.Errorf("full selects a test with %q: %q", out, got)
		}
	}
	if len(got) != 8 {
		t.Errorf("full selects %d tests, want 8: %q", len(got), got)
	}
	conf, _ := SetByName("conformance")
	got, _ = conf.Select(sampleNames)
	for _, n := range got {
		if !strings.Contains(n, "[Conformance]") {
			t.Errorf("conformance selects %q", n)
		}
	}
	if !strings.Contains(got[0], "[Conformance]") || len(got) != 7 {
		t.Errorf("conformance selects %q", got)
	}
	if _, err := SetByName("nope"); err == nil || !strings.Contains(err.Error(), "smoke, conformance, full") {
		t.Errorf("SetByName(nope) = %v", err)
	}
	if !IsSerial(sampleNames[9]) || IsSerial(sampleNames[0]) {
		t.Error("IsSerial")
	}
}

func TestSortConformanceFirst(t *testing.T) {
	n := []string{"b", "z [Conformance]", "a", "c [Conformance]"}
	SortConformanceFirst(n)
	if !slices.Equal(n, []string{"c [Conformance]", "z [Conformance]", "a", "b"}) {
		t.Errorf("sorted %q", n)
	}
}

func TestExactFocus(t *testing.T) {
	names := []string{"[sig-apps] Job should run", "[sig-apps] A (b) c? [Conformance]"}
	re := regexp.MustCompile(ExactFocus(names))
	for _, n := range names {
		if !re.MatchString("Kubernetes e2e suite " + n) {
			t.Errorf("%q not matched", n)
		}
	}
	for _, n := range []string{"[sig-apps] Job should run twice", "[sig-apps] A b c [Conformance]",
		"[sig-apps] X [sig-apps] Job should run!"} {
		if re.MatchString("Kubernetes e2e suite " + n) {
			t.Errorf("%q matched", n)
		}
	}
}
