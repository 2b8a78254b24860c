package cloud

import (
	"errors"
	"fmt"
	"os"

	cloudprovider "k8s.io/cloud-provider"
)

// NewProvider builds the cloud provider registered under name (by
// cloudprovider.RegisterCloudProvider, usually in the provider package's
// init), configured from the file at configPath, "" for none: what a
// cloud-controller-manager does with --cloud-provider and --cloud-config.
// Unlike cloudprovider.InitCloudProvider it never exits the process, and it
// also makes upstream's cluster-ID check: a provider without one is an
// error unless allowUntagged (--allow-untagged-cloud).
func NewProvider(name, configPath string, allowUntagged bool) (cloudprovider.Interface, error) {
	switch {
	case name == "":
		return nil, errors.New("--cloud-provider: required; name the provider this " +
			"cloud-controller-manager runs")
	case cloudprovider.IsExternal(name):
		return nil, fmt.Errorf("--cloud-provider=%s: names no provider; \"external\" is for "+
			"kube-controller-manager, a cloud-controller-manager names the provider it runs", name)
	case !cloudprovider.IsCloudProvider(name):
		return nil, fmt.Errorf("--cloud-provider=%s: no cloud provider is registered under that "+
			"name; a provider registers itself with cloudprovider.RegisterCloudProvider, usually "+
			"when its package is imported", name)
	}
	var (
		c   cloudprovider.Interface
		err error
	)
	if configPath == "" {
		c, err = cloudprovider.GetCloudProvider(name, nil)
	} else {
		f, openErr := os.Open(configPath)
		if openErr != nil {
			return nil, fmt.Errorf("--cloud-config %q: %w", configPath, openErr)
		}
		defer f.Close()
		c, err = cloudprovider.GetCloudProvider(name, f)
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("--cloud-provider=%s (--cloud-config %q): %w", name, configPath, err)
	case c == nil:
		return nil, fmt.Errorf("--cloud-provider=%s: the provider's factory returned no provider", name)
	case !c.HasClusterID() && !allowUntagged:
		return nil, fmt.Errorf("--cloud-provider=%s: no ClusterID found; a ClusterID is required for "+
			"the cloud provider to function properly (--allow-untagged-cloud bypasses this check)", name)
	}
	return c, nil
}
