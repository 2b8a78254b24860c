package legacytokencleaner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// dateLayout is the layout of the labels' and the ConfigMap's dates.
const dateLayout = "2006-01-02"

// controller is one term's cleaner: a pass over the cached tokens at start
// and every interval.
type controller struct {
	client          kubernetes.Interface
	secrets         corelisters.SecretLister
	serviceAccounts corelisters.ServiceAccountLister
	pods            corelisters.PodLister
	synced          []cache.InformerSynced
	period          time.Duration
	interval        time.Duration
	clock           clock.WithTicker
}

func newController(cc descriptor.Context, o Options) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	f := cc.InformerFactory.Core().V1()
	c := &controller{
		client:          client,
		secrets:         f.Secrets().Lister(),
		serviceAccounts: f.ServiceAccounts().Lister(),
		pods:            f.Pods().Lister(),
		period:          o.CleanUpPeriod,
		interval:        o.SyncInterval,
		clock:           o.Clock,
	}
	c.synced = []cache.InformerSynced{f.ServiceAccounts().Informer().HasSynced,
		f.Secrets().Informer().HasSynced, f.Pods().Informer().HasSynced}
	return c, nil
}

// Run waits for the caches, then runs a pass at once and another one
// interval after each pass ends, until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return nil
	}
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Starting the legacy service account token cleaner", "cleanUpPeriod", c.period,
		"interval", c.interval)
	defer log.Info("Stopped the legacy service account token cleaner")
	for {
		if err := c.pass(ctx); err != nil {
			log.Error(err, "Skipping this pass of the legacy service account token cleaner")
		}
		t := c.clock.NewTimer(c.interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

// trackedFrom is the first instant at which the API server has tracked
// token use for a whole day: midnight (UTC) after the date in its
// ConfigMap.
func (c *controller) trackedFrom(ctx context.Context) (time.Time, error) {
	cm, err := c.client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, TrackingConfigMap,
		metav1.GetOptions{})
	if err != nil {
		return time.Time{}, fmt.Errorf("reading since when token use is tracked: %w", err)
	}
	since, ok := cm.Data[TrackingConfigMapKey]
	if !ok {
		return time.Time{}, fmt.Errorf("ConfigMap %s/%s has no data key %q",
			metav1.NamespaceSystem, TrackingConfigMap, TrackingConfigMapKey)
	}
	day, err := time.Parse(dateLayout, since)
	if err != nil {
		return time.Time{}, fmt.Errorf("ConfigMap %s/%s: data key %q: %w",
			metav1.NamespaceSystem, TrackingConfigMap, TrackingConfigMapKey, err)
	}
	return day.AddDate(0, 0, 1), nil
}

// pass marks the tokens unused for the clean-up period invalid, and
// deletes those marked for as long. Its error is why it did nothing: the
// API server has not tracked token use for that long, or its record of it
// cannot be read. Errors with single tokens are logged.
func (c *controller) pass(ctx context.Context) error {
	now := c.clock.Now().UTC()
	from, err := c.trackedFrom(ctx)
	if err != nil {
		return err
	}
	log := logr.FromContextOrDiscard(ctx)
	if now.Before(from.Add(c.period)) {
		log.V(4).Info("Token use not tracked for the clean-up period yet; nothing to do",
			"trackedFrom", from, "cleanUpPeriod", c.period)
		return nil
	}
	cutoff := now.Add(-c.period)
	cutoffDay := cutoff.Format(dateLayout)
	all, err := c.secrets.List(labels.Everything())
	if err != nil {
		return err
	}
	mounted := map[string]map[string]bool{} // by namespace, for this pass
	for _, s := range all {
		if !c.candidate(ctx, s, cutoff, cutoffDay, mounted) {
			continue
		}
		ref := s.Namespace + "/" + s.Name
		invalidSince := s.Labels[InvalidSinceLabel]
		if _, err := time.Parse(dateLayout, invalidSince); err != nil {
			today := now.Format(dateLayout)
			log.Info("Marking an unused legacy service account token invalid", "secret", ref,
				"invalidSince", today)
			if err := c.markInvalid(ctx, s, today); err != nil {
				log.Error(err, "Marking a legacy service account token invalid", "secret", ref)
			}
			continue
		}
		if invalidSince >= cutoffDay {
			continue
		}
		log.Info("Deleting an unused legacy service account token", "secret", ref,
			"created", s.CreationTimestamp, "lastUsed", s.Labels[LastUsedLabel],
			"invalidSince", invalidSince)
		err := c.client.CoreV1().Secrets(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{ResourceVersion: &s.ResourceVersion}})
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			log.Error(err, "Deleting a legacy service account token", "secret", ref)
		}
	}
	return nil
}

// candidate reports whether s is a Secret-based ServiceAccount token that
// has gone unused since before cutoff: created before it, not being
// deleted, not used on or after cutoffDay (no last-used label counts as
// unused since tracking began), generated for a ServiceAccount that still
// lists it, and mounted by no pod of its namespace.
func (c *controller) candidate(ctx context.Context, s *corev1.Secret, cutoff time.Time,
	cutoffDay string, mounted map[string]map[string]bool) bool {
	if s.Type != corev1.SecretTypeServiceAccountToken || !s.CreationTimestamp.Time.Before(cutoff) ||
		s.DeletionTimestamp != nil {
		return false
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("secret", s.Namespace+"/"+s.Name)
	if lastUsed, ok := s.Labels[LastUsedLabel]; ok {
		if _, err := time.Parse(dateLayout, lastUsed); err != nil {
			log.Error(err, "Cannot tell when the token was last used", "label", LastUsedLabel)
			return false
		}
		if lastUsed >= cutoffDay {
			return false
		}
	}
	listed, err := c.listedBy(s)
	if err != nil {
		log.Error(err, "Reading the token's ServiceAccount")
		return false
	}
	if !listed {
		return false // not known to be a generated token
	}
	names, ok := mounted[s.Namespace]
	if !ok {
		if names, err = c.mountedSecrets(s.Namespace); err != nil {
			log.Error(err, "Listing the Secrets the namespace's pods use")
			return false
		}
		mounted[s.Namespace] = names
	}
	return !names[s.Name]
}

// listedBy reports whether s's ServiceAccount (its annotation names it and,
// when set, its UID) exists and lists s among its secrets.
func (c *controller) listedBy(s *corev1.Secret) (bool, error) {
	name := s.Annotations[corev1.ServiceAccountNameKey]
	if name == "" {
		return false, nil
	}
	sa, err := c.serviceAccounts.ServiceAccounts(s.Namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	if uid := types.UID(s.Annotations[corev1.ServiceAccountUIDKey]); uid != "" && uid != sa.UID {
		return false, nil
	}
	for _, ref := range sa.Secrets {
		if ref.Name == s.Name {
			return true, nil
		}
	}
	return false, nil
}

// mountedSecrets returns the names of the Secrets the pods of namespace
// refer to.
func (c *controller) mountedSecrets(namespace string) (map[string]bool, error) {
	pods, err := c.pods.Pods(namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, p := range pods {
		for _, n := range secretNames(p) {
			names[n] = true
		}
	}
	return names, nil
}

// markInvalid labels s invalid since day, by a merge patch that carries
// s's UID (a Secret recreated under the name is not labelled).
func (c *controller) markInvalid(ctx context.Context, s *corev1.Secret, day string) error {
	patch, err := json.Marshal(applycorev1.Secret(s.Name, s.Namespace).WithUID(s.UID).
		WithLabels(map[string]string{InvalidSinceLabel: day}))
	if err != nil {
		return errors.Join(errors.New("encoding the label patch"), err)
	}
	_, err = c.client.CoreV1().Secrets(s.Namespace).Patch(ctx, s.Name, types.MergePatchType,
		patch, metav1.PatchOptions{})
	return err
}
