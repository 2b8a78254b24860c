package logging

import (
	"strconv"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// RouteKlog makes klog, which client-go and most Kubernetes libraries log
// through, write to l: klog.Info/Infof/InfoS, klog.Error/ErrorS, klog.V(n)
// calls, and the loggers klog.FromContext, klog.Background and klog.TODO
// hand out (klog's contextual logger is set to l itself). klog's own output
// stops.
//
// klog checks verbosity before it calls l, against its own -v setting, so
// RouteKlog sets that to the highest V level l has enabled: klog.V(n)
// reaches l exactly when l.V(n) would write. klog's -vmodule is kept.
//
// klog is process-global: this affects every goroutine, and the last call
// wins. Call it once at program start, before goroutines log. restore puts
// back every klog setting as it was before the call; it is meant for tests
// and must not race with logging either.
func RouteKlog(l logr.Logger) (restore func()) {
	state := klog.CaptureState()
	klog.SetLoggerWithOptions(l, klog.ContextualLogger(true))
	var v klog.Level
	_ = v.Set(strconv.Itoa(maxV(l))) // sets klog's global -v; a decimal integer always parses
	return state.Restore
}

// maxV returns the highest n for which l.V(n) is enabled (0 when not even
// V(0) is, for a discarding logger).
func maxV(l logr.Logger) int {
	n := 0
	for n < MaxVerbosity && l.V(n+1).Enabled() {
		n++
	}
	return n
}
