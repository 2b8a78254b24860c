package manager_test

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
)

// whenServed is docs/dynamic.md's WhenServed snippet; test/docs keeps the
// two the same.
func whenServed(initWidgets descriptor.InitFunc) descriptor.Descriptor {
	// snippet:begin when-served
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	d := descriptor.New("widget-controller", initWidgets).WhenServed(widgets)
	// snippet:end
	return d
}

// setControllers is docs/dynamic.md's SetControllers snippet.
func setControllers(m *manager.Manager, log logr.Logger) {
	// snippet:begin set-controllers
	// entries as --controllers: "*", "name", "-name", aliases
	if err := m.SetControllers([]string{"*", "-garbage-collector-controller"}); err != nil {
		log.Error(err, "Selection refused; nothing changed")
	}
	// snippet:end
}

func TestDynamicSnippets(t *testing.T) {
	nop := func(context.Context, descriptor.Context) (descriptor.Controller, error) { return nil, nil }
	d := whenServed(nop)
	if got := d.Served(); len(got) != 1 || got[0].Resource != "widgets" {
		t.Errorf("Served() = %v, want the widgets resource", got)
	}
	m, err := manager.NewBuilder("snippet").
		WithClient(fake.NewClientset(), nil).
		Register(descriptor.New("garbage-collector-controller", nop)).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	setControllers(m, logr.Discard())
	if st, _ := m.Status("garbage-collector-controller"); st.Phase != manager.PhaseDisabled {
		t.Errorf("garbage-collector-controller's phase = %q after the snippet, want %q",
			st.Phase, manager.PhaseDisabled)
	}
}
