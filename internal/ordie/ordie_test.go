package ordie_test

import (
	"errors"
	"testing"

	"go.uber.org/goleak"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/ordie"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type failingBuilder struct{ descriptor.ClientBuilder }

func (failingBuilder) Config(string) (*rest.Config, error) { return nil, errors.New("no config") }
func (failingBuilder) Client(string) (kubernetes.Interface, error) {
	return nil, errors.New("no client")
}

// TestOrDiePanicsNamingTheClient: the …OrDie methods panic (a host turns
// that into the controller's failure) with the client's name and cause.
func TestOrDiePanicsNamingTheClient(t *testing.T) {
	b := ordie.Builder{ClientBuilder: failingBuilder{}}
	for _, tc := range []struct {
		name string
		call func()
		want string
	}{
		{"ConfigOrDie", func() { b.ConfigOrDie("route-controller") },
			`client config for "route-controller": no config`},
		{"ClientOrDie", func() { b.ClientOrDie("route-controller") },
			`client for "route-controller": no client`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				v := recover()
				err, ok := v.(error)
				if !ok || err.Error() != tc.want {
					t.Errorf("panic %v, want %q", v, tc.want)
				}
			}()
			tc.call()
		})
	}
}
