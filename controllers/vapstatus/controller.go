package vapstatus

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	arv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	applyv1 "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"k8s.io/client-go/kubernetes"
	listers "k8s.io/client-go/listers/admissionregistration/v1"
	"k8s.io/client-go/openapi"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// checker type-checks a policy's expressions; *validating.TypeChecker, the
// API server library's, in production.
type checker interface {
	Check(*arv1.ValidatingAdmissionPolicy) []arv1.ExpressionWarning
}

// controller writes the type-checking status of policies; keys are names.
type controller struct {
	client   kubernetes.Interface
	policies listers.ValidatingAdmissionPolicyLister
	checker  checker
	workers  int
	loop     *workloop.Loop
}

func newController(cc descriptor.Context, workers int) (*controller, error) {
	if cc.RESTMapper == nil {
		return nil, errors.New("the host gives no REST mapper (descriptor.Context.RESTMapper): " +
			"the kinds a policy matches cannot be found; build the host with one")
	}
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	informer := cc.InformerFactory.Admissionregistration().V1().ValidatingAdmissionPolicies()
	discovery := client.Discovery()
	c := &controller{
		client:   client,
		policies: informer.Lister(),
		checker: &validating.TypeChecker{
			// The OpenAPI client is asked for at each resolution: a fake
			// clientset's discovery has none, and none is needed until a
			// policy is checked.
			SchemaResolver: newOpenAPIResolver(func() openapi.Client {
				return discovery.OpenAPIV3()
			}),
			RestMapper: cc.RESTMapper,
		},
		workers: workers,
	}
	// The loop exists before the handler: a running informer (warm
	// standby) calls it at once. On a later failure it is shut down here.
	c.loop = workloop.New(cc.Name, c.sync, workloop.Options{Metrics: cc.Metrics})
	if err := c.loop.Watch(informer.Informer(), workloop.EnqueueKey(), unobserved); err != nil {
		c.loop.ShutDown()
		return nil, err
	}
	return c, nil
}

// Run waits for the cache, then checks policies until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Type-checking ValidatingAdmissionPolicies", "workers", c.workers)
	defer log.Info("Stopped type-checking ValidatingAdmissionPolicies")
	return c.loop.RunWorkers(ctx, c.workers)
}

// unobserved passes the adds and updates of policies whose generation the
// status has not caught up with: the ones a sync writes. Deletions are not
// watched, as in KCM.
func unobserved(_, obj any) bool {
	p, ok := obj.(*arv1.ValidatingAdmissionPolicy)
	return ok && p.Generation > p.Status.ObservedGeneration
}

// sync type-checks a policy whose generation is newer than its status's,
// and applies the status: the warnings (none is an empty typeChecking)
// and the generation they are of.
func (c *controller) sync(ctx context.Context, name string) error {
	policy, err := c.policies.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case policy.Generation <= policy.Status.ObservedGeneration:
		return nil
	}
	warnings := c.checker.Check(policy)
	typeChecking := applyv1.TypeChecking()
	for _, w := range warnings {
		typeChecking.WithExpressionWarnings(applyv1.ExpressionWarning().
			WithFieldRef(w.FieldRef).WithWarning(w.Warning))
	}
	status := applyv1.ValidatingAdmissionPolicy(name).WithStatus(
		applyv1.ValidatingAdmissionPolicyStatus().
			WithObservedGeneration(policy.Generation).
			WithTypeChecking(typeChecking))
	if _, err := c.client.AdmissionregistrationV1().ValidatingAdmissionPolicies().ApplyStatus(
		ctx, status, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		return fmt.Errorf("applying the type-checking status of ValidatingAdmissionPolicy %s: %w",
			name, err)
	}
	logr.FromContextOrDiscard(ctx).V(2).Info("Type-checked a ValidatingAdmissionPolicy",
		"policy", name, "generation", policy.Generation, "warnings", len(warnings))
	return nil
}
