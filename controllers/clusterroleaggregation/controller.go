package clusterroleaggregation

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/kubernetes"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// controller aggregates ClusterRoles; its keys are role names.
type controller struct {
	client kubernetes.Interface
	roles  rbaclisters.ClusterRoleLister
	loop   *workloop.Loop
}

func newController(cc descriptor.Context) (*controller, error) {
	client, err := cc.ClientBuilder.Client(cc.Name)
	if err != nil {
		return nil, err
	}
	informer := cc.InformerFactory.Rbac().V1().ClusterRoles()
	c := &controller{client: client, roles: informer.Lister()}
	// The loop exists before the handler: a running informer (warm
	// standby) calls it at once. On a later failure it is shut down here.
	c.loop = workloop.New(cc.Name, c.sync, workloop.Options{Metrics: cc.Metrics})
	if err := c.loop.Watch(informer.Informer(), workloop.EnqueueMapped(c.aggregated)); err != nil {
		c.loop.ShutDown()
		return nil, err
	}
	return c, nil
}

// Run waits for the cache, then aggregates until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Aggregating ClusterRoles", "workers", workers)
	defer log.Info("Stopped aggregating ClusterRoles")
	return c.loop.RunWorkers(ctx, workers)
}

// aggregated is the names of every cached ClusterRole with an
// aggregationRule, whatever changed: which role feeds which is not known
// without looking at them all.
func (c *controller) aggregated(any) []string {
	all, err := c.roles.List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range all {
		if r.AggregationRule != nil {
			out = append(out, r.Name)
		}
	}
	return out
}

// sync gives the role named key the rules of the roles its selectors match.
func (c *controller) sync(ctx context.Context, key string) error {
	role, err := c.roles.Get(key)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case role.AggregationRule == nil:
		return nil
	}
	rules, err := c.rulesOf(role)
	if err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(rules, role.Rules) {
		return nil
	}
	apply := rbacv1ac.ClusterRole(role.Name)
	for _, r := range rules {
		apply.WithRules(rbacv1ac.PolicyRule().
			WithAPIGroups(r.APIGroups...).
			WithResources(r.Resources...).
			WithResourceNames(r.ResourceNames...).
			WithNonResourceURLs(r.NonResourceURLs...).
			WithVerbs(r.Verbs...))
	}
	_, err = c.client.RbacV1().ClusterRoles().Apply(ctx, apply,
		metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("applying the rules of ClusterRole %s: %w", role.Name, err)
	}
	return nil
}

// rulesOf is the union of the rules of the roles role's selectors match,
// in selector order, then role name order, each rule once.
func (c *controller) rulesOf(role *rbacv1.ClusterRole) ([]rbacv1.PolicyRule, error) {
	rules := []rbacv1.PolicyRule{}
	for i := range role.AggregationRule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&role.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			return nil, fmt.Errorf("aggregationRule.clusterRoleSelectors[%d]: %w", i, err)
		}
		matched, err := c.roles.List(sel)
		if err != nil {
			return nil, err
		}
		slices.SortFunc(matched, func(a, b *rbacv1.ClusterRole) int {
			return strings.Compare(a.Name, b.Name)
		})
		for _, m := range matched {
			if m.Name == role.Name {
				continue
			}
			for _, r := range m.Rules {
				if !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool {
					return equality.Semantic.DeepEqual(have, r)
				}) {
					rules = append(rules, r)
				}
			}
		}
	}
	return rules, nil
}
