package logging_test

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/klog/v2"

	"github.com/ctrlhost/ctrlhost/logging"
)

func TestForProgram(t *testing.T) {
	var buf bytes.Buffer
	log, done, err := logging.ForProgram(logging.Options{Format: logging.FormatJSON}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("from logr")
	klog.Info("from klog")
	done()
	for _, want := range []string{`"msg":"from logr"`, `"msg":"from klog"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("output lacks %s:\n%s", want, buf.String())
		}
	}
	if _, _, err := logging.ForProgram(logging.Options{Format: "yaml"}, &buf); err == nil {
		t.Error("bad format accepted")
	}
}
