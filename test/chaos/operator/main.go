// Command operator is one replica of the chaos suite's operator: a Manager
// with KCM's flags and one leader-elected controller that, while active,
// creates a small ConfigMap in --namespace every --write-interval through
// the client its term hands out (the client write fencing guards). It
// appends lines to --activity-file, one write each, so lines from replicas
// never interleave:
//
//	start <identity> <unix-nanos> <term>
//	stop <identity> <unix-nanos> <term>
//	write <identity> <unix-nanos> <term> ok|fenced|error [quoted error]
//
// where term is the start's unix-nanos. With --sharded it also registers a
// sharded controller (run under --enable-sharding) that records each slot
// term it runs:
//
//	slot-start <identity> <unix-nanos> <slot>
//	slot-stop <identity> <unix-nanos> <slot>
//
// The driver steers a replica through
// files in --control-dir: "<identity>.panic" makes its controller panic,
// "<identity>.ignore-context" makes it keep writing for --ignore-for after
// its context ends.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/fence"
	"github.com/ctrlhost/ctrlhost/logging"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/shard"
)

// Labels and annotations every write carries.
const (
	LabelWrite      = "chaos.ctrlhost.io/write"
	AnnotIdentity   = "chaos.ctrlhost.io/identity"
	AnnotTerm       = "chaos.ctrlhost.io/term"
	AnnotSequence   = "chaos.ctrlhost.io/seq"
	AnnotAttempt    = "chaos.ctrlhost.io/attempt"
	controllerName  = "chaos-controller"
	writeTimeout    = 2 * time.Second
	defaultInterval = 200 * time.Millisecond
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run() error {
	opts := manager.NewOptions()
	fs := pflag.NewFlagSet("operator", pflag.ContinueOnError)
	opts.AddFlags(fs)
	activity := fs.String("activity-file", "", "file to append start/stop/write lines to")
	identity := fs.String("identity", "", "leader election identity")
	controlDir := fs.String("control-dir", "",
		"directory the driver drops <identity>.panic / <identity>.ignore-context into")
	namespace := fs.String("namespace", "chaos", "namespace the controller writes ConfigMaps into")
	interval := fs.Duration("write-interval", defaultInterval, "time between writes while active")
	ignoreFor := fs.Duration("ignore-for", 3*time.Second,
		"how long a controller told to ignore its context keeps writing after it ends")
	sharded := fs.Bool("sharded", false,
		"also run a sharded controller that records the slots it works")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if *identity == "" || *activity == "" || *controlDir == "" {
		return errors.New("--identity, --activity-file and --control-dir are required")
	}
	opts.LeaderElection.Identity = *identity
	f, err := os.OpenFile(*activity, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	var mu sync.Mutex
	record := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = fmt.Fprintf(f, format+"\n", args...)
	}
	told := func(what string) bool {
		_, err := os.Stat(filepath.Join(*controlDir, *identity+"."+what))
		return err == nil
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// A controller that ignores its context goes on in a process that stays
	// up until it is done, so that its writes after its term ended meet the
	// fence instead of the process's exit.
	var misbehaving sync.WaitGroup
	init := func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		client, err := cc.ClientBuilder.Client(cc.Name)
		if err != nil {
			return nil, err
		}
		w := &writer{client: client, ns: *namespace, id: *identity, record: record}
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			w.term = time.Now().UnixNano()
			w.seq = 0
			record("start %s %d %d", *identity, w.term, w.term)
			defer func() { record("stop %s %d %d", *identity, time.Now().UnixNano(), w.term) }()
			tick := time.NewTicker(*interval)
			defer tick.Stop()
			// Write at once, so a new term's first write (by which the
			// driver orders terms) follows its start closely.
			w.write(ctx)
			for {
				select {
				case <-ctx.Done():
					if told("ignore-context") {
						// Misbehave: keep writing, as a controller that
						// drops its context would.
						misbehaving.Add(1)
						defer misbehaving.Done()
						until := time.Now().Add(*ignoreFor)
						for time.Now().Before(until) {
							<-tick.C
							w.write(context.Background())
						}
					}
					return nil
				case <-tick.C:
					if told("panic") {
						panic("chaos: controller told to panic")
					}
					w.write(ctx)
				}
			}
		}), nil
	}
	b := manager.NewBuilder("chaos-operator").
		WithOptions(opts).
		Register(descriptor.New(controllerName, init))
	if *sharded {
		b.Register(descriptor.New("chaos-sharded", func(_ context.Context,
			cc descriptor.Context) (descriptor.Controller, error) {
			if cc.Shard == nil || len(cc.Shard.Slots) != 1 {
				return nil, fmt.Errorf("chaos-sharded: scope %+v, want one slot (run with --enable-sharding)",
					cc.Shard)
			}
			slot := cc.Shard.Slots[0]
			return descriptor.ControllerFunc(func(ctx context.Context) error {
				record("slot-start %s %d %d", *identity, time.Now().UnixNano(), slot)
				<-ctx.Done()
				record("slot-stop %s %d %d", *identity, time.Now().UnixNano(), slot)
				return nil
			}), nil
		}).Sharded(shard.ByNamespace))
	}
	m, err := b.Build()
	if err != nil {
		return err
	}
	defer logging.RouteKlog(m.Logger())()
	record("ready %s %d", *identity, time.Now().UnixNano())
	err = m.Run(ctx)
	misbehaving.Wait() // bounded by --ignore-for
	return err
}

// writer creates one ConfigMap per write; its creation resourceVersion is
// the API server's order of the write.
type writer struct {
	client kubernetes.Interface
	ns, id string
	term   int64
	seq    int
	record func(format string, args ...any)
}

func (w *writer) write(ctx context.Context) {
	w.seq++
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	at := time.Now().UnixNano()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name:   fmt.Sprintf("w-%s-%d-%d", w.id, w.term, w.seq),
		Labels: map[string]string{LabelWrite: "true"},
		Annotations: map[string]string{
			AnnotIdentity: w.id,
			AnnotTerm:     strconv.FormatInt(w.term, 10),
			AnnotSequence: strconv.Itoa(w.seq),
			AnnotAttempt:  strconv.FormatInt(at, 10),
		},
	}}
	_, err := w.client.CoreV1().ConfigMaps(w.ns).Create(ctx, cm, metav1.CreateOptions{})
	msg := ""
	if err != nil {
		msg = strconv.Quote(err.Error())
	}
	w.record("write %s %d %d %s %s", w.id, at, w.term, outcome(err), msg)
}

func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case isFenced(err):
		return "fenced"
	default:
		return "error"
	}
}

// isFenced reports whether a term's client refused the write because the
// lease was no longer known to be valid.
func isFenced(err error) bool { return errors.Is(err, fence.ErrFenced) }
