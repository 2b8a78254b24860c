// Package cloudtest is a cloud provider for tests and examples: upstream's
// k8s.io/cloud-provider/fake, whose instances are read from a file, so that
// a test can make an instance disappear under a cloud-controller-manager
// running as a separate process.
//
// Guarantees: every existence and shutdown question re-reads the file, so
// a change is seen by the next node-monitor period of every process using
// it; a missing or malformed file is an error answer, never a panic.
// Non-guarantees: everything else is upstream's fake (load balancers and
// routes live in the process's memory; calls are recorded without bound).
package cloudtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
	"sigs.k8s.io/yaml"
)

// ProviderName is the name Register registers the provider under.
const ProviderName = "fake"

// Config is the --cloud-config file of the provider, in YAML or JSON.
type Config struct {
	// StateFile is the file holding the cloud's State, re-read on every
	// question about an instance. Required.
	StateFile string `json:"stateFile"`
	// LoadBalancerIP is the ingress IP of every load balancer the provider
	// makes. Default: 203.0.113.1.
	LoadBalancerIP string `json:"loadBalancerIP,omitempty"`
}

// State is what the cloud has.
type State struct {
	// Instances are the provider IDs of the instances that exist; a node
	// whose spec.providerID is not listed does not exist.
	Instances []string `json:"instances"`
	// Shutdown are the provider IDs of instances that exist but are shut
	// down.
	Shutdown []string `json:"shutdown,omitempty"`
}

// WriteState replaces the state in path (atomically: a reader sees the old
// state or the new one).
func WriteState(path string, s State) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

var registerOnce sync.Once

// Register registers the provider as "fake" with
// cloudprovider.RegisterCloudProvider; further calls do nothing.
func Register() {
	registerOnce.Do(func() {
		cloudprovider.RegisterCloudProvider(ProviderName, func(
			config io.Reader,
		) (cloudprovider.Interface, error) {
			if config == nil {
				return nil, errors.New("cloudtest: --cloud-config is required (a file with stateFile: <path>)")
			}
			data, err := io.ReadAll(config)
			if err != nil {
				return nil, err
			}
			var c Config
			if err := yaml.UnmarshalStrict(data, &c); err != nil {
				return nil, fmt.Errorf("cloudtest: --cloud-config: %w", err)
			}
			return New(c)
		})
	})
}

// Cloud is upstream's fake with instances from a state file, and its load
// balancer calls serialised: upstream's fake writes its maps without a lock,
// while the service controller calls it from its service and node workers
// at once.
type Cloud struct {
	*fake.Cloud
	state string
	lbMu  sync.Mutex
}

// New returns the provider for c.
func New(c Config) (*Cloud, error) {
	if c.StateFile == "" {
		return nil, errors.New("cloudtest: stateFile is required")
	}
	ip := c.LoadBalancerIP
	if ip == "" {
		ip = "203.0.113.1"
	}
	parsed := net.ParseIP(ip)
	if parsed == nil {
		return nil, fmt.Errorf("cloudtest: loadBalancerIP %q is not an IP", ip)
	}
	return &Cloud{
		Cloud: &fake.Cloud{ExternalIP: parsed, Balancers: map[string]fake.Balancer{},
			Provider: ProviderName},
		state: c.StateFile,
	}, nil
}

func (c *Cloud) read() (State, error) {
	var s State
	data, err := os.ReadFile(c.state)
	if err != nil {
		return s, fmt.Errorf("cloudtest: %w", err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("cloudtest: state %s: %w", c.state, err)
	}
	return s, nil
}

// Instances answers with c itself, so that the file decides existence.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) { return c, true }

// InstancesV2 is not offered: the controllers then use Instances.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return nil, false }

// InstanceExistsByProviderID reports whether the state lists providerID.
func (c *Cloud) InstanceExistsByProviderID(_ context.Context, providerID string) (bool, error) {
	s, err := c.read()
	return slices.Contains(s.Instances, providerID), err
}

// InstanceShutdownByProviderID reports whether the state lists providerID
// as shut down.
func (c *Cloud) InstanceShutdownByProviderID(_ context.Context, providerID string) (bool, error) {
	s, err := c.read()
	return slices.Contains(s.Shutdown, providerID), err
}

// InstanceID is the node's name: nodes of this cloud are named after their
// instance.
func (c *Cloud) InstanceID(_ context.Context, nodeName types.NodeName) (string, error) {
	return string(nodeName), nil
}

// NodeAddresses answers with no addresses.
func (c *Cloud) NodeAddresses(context.Context, types.NodeName) ([]v1.NodeAddress, error) {
	return nil, nil
}

// NodeAddressesByProviderID answers with no addresses.
func (c *Cloud) NodeAddressesByProviderID(context.Context, string) ([]v1.NodeAddress, error) {
	return nil, nil
}

// LoadBalancer answers with the fake's load balancers, one call at a time.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return serialLB{c}, true }

type serialLB struct{ c *Cloud }

func (l serialLB) GetLoadBalancer(ctx context.Context, cluster string,
	svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	l.c.lbMu.Lock()
	defer l.c.lbMu.Unlock()
	return l.c.Cloud.GetLoadBalancer(ctx, cluster, svc)
}

func (l serialLB) GetLoadBalancerName(ctx context.Context, cluster string, svc *v1.Service) string {
	return l.c.Cloud.GetLoadBalancerName(ctx, cluster, svc)
}

func (l serialLB) EnsureLoadBalancer(ctx context.Context, cluster string, svc *v1.Service,
	nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	l.c.lbMu.Lock()
	defer l.c.lbMu.Unlock()
	return l.c.Cloud.EnsureLoadBalancer(ctx, cluster, svc, nodes)
}

func (l serialLB) UpdateLoadBalancer(ctx context.Context, cluster string, svc *v1.Service,
	nodes []*v1.Node) error {
	l.c.lbMu.Lock()
	defer l.c.lbMu.Unlock()
	return l.c.Cloud.UpdateLoadBalancer(ctx, cluster, svc, nodes)
}

func (l serialLB) EnsureLoadBalancerDeleted(ctx context.Context, cluster string,
	svc *v1.Service) error {
	l.c.lbMu.Lock()
	defer l.c.lbMu.Unlock()
	return l.c.Cloud.EnsureLoadBalancerDeleted(ctx, cluster, svc)
}

var _ cloudprovider.Interface = (*Cloud)(nil)
