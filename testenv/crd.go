package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
)

// defaultCRDTimeout bounds InstallCRDs, InstallCRDFiles and UninstallCRDs
// when their context has no deadline.
const defaultCRDTimeout = 30 * time.Second

var crdGVR = schema.GroupVersionResource{
	Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions",
}

// InstallCRDs creates each CustomResourceDefinition in crds, or updates it
// when one of the same name exists (so installing twice is fine), and waits
// until every one is ready: its conditions Established and NamesAccepted
// are True, and the API server's discovery lists its resource in every
// version marked served: true. A CRD is given as an
// *unstructured.Unstructured, a map[string]any, or any value that marshals
// to a CRD's JSON, such as an apiextensions/v1 CustomResourceDefinition; an
// empty apiVersion and kind are taken to be apiextensions.k8s.io/v1
// CustomResourceDefinition. The arguments are not modified.
//
// Every CRD is checked before the first request: it must have
// metadata.name, spec.group, spec.names.plural, a served version, and a
// name of the form <plural>.<group>. The wait ends at ctx's deadline, or
// after 30s if ctx has none; the error then names each CRD that was not
// ready and what it lacked. Discovery cannot show a change that leaves the
// names and versions as they were (a new schema, say): the API server
// applies such an update within moments of InstallCRDs returning.
func (e *Env) InstallCRDs(ctx context.Context, crds ...any) error {
	srcs := make([]*crdSource, 0, len(crds))
	var errs []error
	seen := crdSet{}
	for i, v := range crds {
		c, err := crdFromValue(i, v)
		if err == nil {
			err = seen.add(c)
		}
		errs = append(errs, err)
		srcs = append(srcs, c)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return e.installCRDs(ctx, srcs)
}

// InstallCRDFiles installs, as InstallCRDs does, the CRDs in the named YAML
// or JSON files. A path may be a directory: then every .yaml, .yml and
// .json file directly in it is read, in name order (subdirectories are not
// searched), and it must hold at least one. A file may hold several YAML
// documents separated by "---" lines; empty ones are skipped, and every
// other one must be an apiextensions.k8s.io/v1 CustomResourceDefinition.
// All files are read and checked before the first request; errors name the
// file and the document, counted from 1.
func (e *Env) InstallCRDFiles(ctx context.Context, paths ...string) error {
	srcs, err := readCRDFiles(paths)
	if err != nil {
		return err
	}
	return e.installCRDs(ctx, srcs)
}

// UninstallCRDs deletes the named CRDs (each name is <plural>.<group>) and
// waits until each is gone and its resource is no longer in the API
// server's discovery, in any version. Deleting a CRD deletes its custom
// resources first; the API server does that itself. A CRD that does not
// exist counts as gone. The wait ends at ctx's deadline, or after 30s if
// ctx has none.
func (e *Env) UninstallCRDs(ctx context.Context, names ...string) error {
	var errs []error
	for i, n := range names {
		plural, group, ok := strings.Cut(n, ".")
		if !ok || plural == "" || group == "" {
			errs = append(errs, fmt.Errorf("testenv: UninstallCRDs: names[%d] %q is not "+
				"a CRD name; want <plural>.<group>, e.g. \"widgets.example.com\"", i, n))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if len(names) == 0 {
		return nil
	}
	cl, err := e.newCRDClients()
	if err != nil {
		return err
	}
	defer cl.close()
	ctx, cancel := withDefaultTimeout(ctx, defaultCRDTimeout)
	defer cancel()
	begin := time.Now()

	var gone []*crdGone
	for _, n := range slices.Compact(slices.Sorted(slices.Values(names))) {
		plural, group, _ := strings.Cut(n, ".")
		g := &crdGone{name: n, group: group, plural: plural}
		// The served versions, to check their discovery documents even if
		// the group's document is gone first.
		if crd, err := cl.dyn.Resource(crdGVR).Get(ctx, n, metav1.GetOptions{}); err == nil {
			g.versions = servedVersions(crd)
		} else if !apierrors.IsNotFound(err) {
			return fmt.Errorf("testenv: CRD %q: reading it before deleting: %w", n, err)
		}
		err := cl.dyn.Resource(crdGVR).Delete(ctx, n, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("testenv: CRD %q: deleting: %w", n, err)
		}
		gone = append(gone, g)
	}
	who := make([]string, len(gone))
	for i, g := range gone {
		who[i] = fmt.Sprintf("CRD %q", g.name)
	}
	check := func(ctx context.Context, i int) []shortfall { return cl.goneCheck(ctx, gone[i]) }
	if err := poll(ctx, begin, who, check); err != nil {
		return err
	}
	e.opts.Logf("testenv: CRDs %s uninstalled after %v", strings.Join(names, ", "),
		time.Since(begin).Round(time.Millisecond))
	return nil
}

// installCRDs creates or updates validated CRDs and waits until they are
// ready.
func (e *Env) installCRDs(ctx context.Context, crds []*crdSource) error {
	if len(crds) == 0 {
		return nil
	}
	cl, err := e.newCRDClients()
	if err != nil {
		return err
	}
	defer cl.close()
	ctx, cancel := withDefaultTimeout(ctx, defaultCRDTimeout)
	defer cancel()
	begin := time.Now()
	for _, c := range crds {
		if err := cl.apply(ctx, c.obj.DeepCopy()); err != nil {
			return fmt.Errorf("testenv: CRD %q%s: %w", c.name, fromSuffix(c.from), err)
		}
	}
	who := make([]string, len(crds))
	names := make([]string, len(crds))
	for i, c := range crds {
		who[i] = fmt.Sprintf("CRD %q%s", c.name, fromSuffix(c.from))
		names[i] = c.name
	}
	check := func(ctx context.Context, i int) []shortfall { return cl.readyCheck(ctx, crds[i]) }
	if err := poll(ctx, begin, who, check); err != nil {
		return err
	}
	e.opts.Logf("testenv: CRDs %s established and served after %v", strings.Join(names, ", "),
		time.Since(begin).Round(time.Millisecond))
	return nil
}

func fromSuffix(from string) string {
	if from == "" {
		return ""
	}
	return " (" + from + ")"
}

func withDefaultTimeout(ctx context.Context, d time.Duration,
) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// shortfall is one thing a CRD still lacks: the headline of the error
// ("not Established") and its detail.
type shortfall struct {
	headline, detail string
}

// poll runs check(i) for every item i each pollInterval until check finds
// nothing lacking for all of them, or ctx ends; then the error lists what
// each item still lacked, naming it by who[i]. Each check gets at most
// checkTimeout.
func poll(ctx context.Context, begin time.Time, who []string,
	check func(ctx context.Context, i int) []shortfall,
) error {
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	pending := make([]int, len(who))
	for i := range pending {
		pending[i] = i
	}
	lacking := make([][]shortfall, len(who))
	for {
		var still []int
		for _, i := range pending {
			checkCtx, cancel := context.WithTimeout(ctx, checkTimeout)
			lacking[i] = check(checkCtx, i)
			cancel()
			if len(lacking[i]) > 0 {
				still = append(still, i)
			}
		}
		pending = still
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			after := time.Since(begin).Round(100 * time.Millisecond).String()
			if cause := context.Cause(ctx); !errors.Is(cause, context.DeadlineExceeded) {
				after += fmt.Sprintf(" (%v)", cause)
			}
			var errs []error
			for _, i := range pending {
				details := make([]string, len(lacking[i]))
				for j, x := range lacking[i] {
					details[j] = x.detail
				}
				errs = append(errs, fmt.Errorf("testenv: %s: %s after %s: %s",
					who[i], lacking[i][0].headline, after, strings.Join(details, "; ")))
			}
			return errors.Join(errs...)
		case <-ticker.C:
		}
	}
}

// crdGone is a CRD UninstallCRDs waits for to disappear.
type crdGone struct {
	name, group, plural string
	versions            []string // served before the delete, if it existed
}

// crdClients are the clients of one InstallCRDs or UninstallCRDs call.
// They have their own transport, whose connections close is to close, so
// that no connection goroutines outlive the call by more than a moment.
type crdClients struct {
	dyn       dynamic.Interface
	disco     *discovery.DiscoveryClient
	transport *http.Transport
}

func (e *Env) newCRDClients() (*crdClients, error) {
	e.mu.Lock()
	stopped := e.stopped
	e.mu.Unlock()
	if stopped {
		return nil, errors.New("testenv: the Env is stopped; " +
			"install and uninstall CRDs before Stop")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(e.caPEM) {
		return nil, errors.New("testenv: the generated CA certificate does not parse")
	}
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: checkTimeout,
		MaxIdleConnsPerHost: 4,
	}
	cfg := &rest.Config{
		Host:        e.apiserverURL,
		BearerToken: e.tokens[AdminUser],
		Transport:   tr,
		QPS:         clientQPS,
		Burst:       clientBurst,
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("testenv: dynamic client: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("testenv: discovery client: %w", err)
	}
	return &crdClients{dyn: dyn, disco: disco, transport: tr}, nil
}

func (cl *crdClients) close() { cl.transport.CloseIdleConnections() }

// apply creates obj, or replaces the CRD of its name.
func (cl *crdClients) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	res := cl.dyn.Resource(crdGVR)
	_, err := res.Create(ctx, obj, metav1.CreateOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating: %w", err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := res.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		obj.SetResourceVersion(cur.GetResourceVersion())
		_, err = res.Update(ctx, obj, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("updating the existing CRD: %w", err)
	}
	return nil
}

// readyCheck reports what c lacks to be ready: conditions Established
// and NamesAccepted True, its plural accepted, and its resource in the
// discovery document of every served version.
func (cl *crdClients) readyCheck(ctx context.Context, c *crdSource) []shortfall {
	var s []shortfall
	crd, err := cl.dyn.Resource(crdGVR).Get(ctx, c.name, metav1.GetOptions{})
	if err != nil {
		return []shortfall{{"not Established", fmt.Sprintf("reading it: %v", err)}}
	}
	for _, cond := range []struct{ typ, headline string }{
		{"Established", "not Established"},
		{"NamesAccepted", "names not accepted"},
	} {
		if d := conditionShortfall(crd, cond.typ, "True"); d != "" {
			s = append(s, shortfall{cond.headline, d})
		}
	}
	accepted, _, _ := unstructured.NestedString(crd.Object, "status", "acceptedNames", "plural")
	if accepted != c.plural && len(s) == 0 {
		s = append(s, shortfall{"names not accepted",
			fmt.Sprintf("status.acceptedNames.plural is %q, want %q", accepted, c.plural)})
	}
	for _, v := range c.served {
		if d := cl.discoveryShortfall(ctx, c.group+"/"+v, c.plural, true); d != "" {
			s = append(s, shortfall{"not served", d})
		}
	}
	return s
}

// goneCheck reports what remains of g: the CRD itself, or its resource in
// discovery.
func (cl *crdClients) goneCheck(ctx context.Context, g *crdGone) []shortfall {
	var s []shortfall
	crd, err := cl.dyn.Resource(crdGVR).Get(ctx, g.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		s = append(s, shortfall{"not deleted", fmt.Sprintf("reading it: %v", err)})
	default:
		d := "still exists"
		if t := crd.GetDeletionTimestamp(); t != nil {
			d += fmt.Sprintf(", deleting since %s", t.UTC().Format(time.RFC3339))
		}
		if cd := conditionShortfall(crd, "Terminating", "False"); cd != "" {
			d += ", " + cd
		}
		s = append(s, shortfall{"not deleted", d})
	}
	versions := slices.Clone(g.versions)
	var group metav1.APIGroup
	err = cl.disco.RESTClient().Get().AbsPath("/apis", g.group).Do(ctx).Into(&group)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		s = append(s, shortfall{"still served",
			fmt.Sprintf("discovery of group %s: %v", g.group, err)})
	default:
		for _, v := range group.Versions {
			versions = append(versions, v.Version)
		}
	}
	for _, v := range slices.Compact(slices.Sorted(slices.Values(versions))) {
		if d := cl.discoveryShortfall(ctx, g.group+"/"+v, g.plural, false); d != "" {
			s = append(s, shortfall{"still served", d})
		}
	}
	return s
}

// discoveryShortfall describes how the discovery document of groupVersion
// fails to list (want true) or to omit (want false) resource plural, or
// returns "".
func (cl *crdClients) discoveryShortfall(ctx context.Context, groupVersion, plural string,
	want bool,
) string {
	list, err := cl.disco.ServerResourcesForGroupVersionWithContext(ctx, groupVersion)
	if err != nil {
		if apierrors.IsNotFound(err) && !want {
			return ""
		}
		return fmt.Sprintf("discovery of %s: %v", groupVersion, err)
	}
	listed := slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool {
		return r.Name == plural
	})
	switch {
	case want && !listed:
		return fmt.Sprintf("discovery of %s does not list %q yet", groupVersion, plural)
	case !want && listed:
		return fmt.Sprintf("discovery of %s still lists %q", groupVersion, plural)
	}
	return ""
}

// conditionShortfall returns "" if crd's condition typ has status want,
// else a description such as
// "condition Established=False (reason Installing: the message)".
func conditionShortfall(crd *unstructured.Unstructured, typ, want string) string {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if t, _ := m["type"].(string); t != typ {
			continue
		}
		status, _ := m["status"].(string)
		if status == want {
			return ""
		}
		reason, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		d := fmt.Sprintf("condition %s=%s", typ, status)
		if reason != "" || msg != "" {
			d += fmt.Sprintf(" (reason %s: %s)", reason, msg)
		}
		return d
	}
	if want == "False" {
		return "" // an absent condition is as good as False
	}
	return fmt.Sprintf("condition %s not set yet", typ)
}

// servedVersions are the versions of crd marked served: true.
func servedVersions(crd *unstructured.Unstructured) []string {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var served []string
	for _, v := range versions {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		if ok, _ := m["served"].(bool); ok && name != "" {
			served = append(served, name)
		}
	}
	return served
}
