package descriptor_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/healthz"
)

type checks struct {
	health, live, ready error
}

func (c checks) Run(context.Context) error { return nil }

type general struct{ checks }

func (g general) HealthCheck(*http.Request) error { return g.health }

type liveOnly struct{ checks }

func (l liveOnly) LivenessCheck(*http.Request) error { return l.live }

type readyOnly struct{ checks }

func (r readyOnly) ReadinessCheck(*http.Request) error { return r.ready }

type allThree struct{ checks }

func (a allThree) HealthCheck(*http.Request) error    { return a.health }
func (a allThree) LivenessCheck(*http.Request) error  { return a.live }
func (a allThree) ReadinessCheck(*http.Request) error { return a.ready }

func TestHealthChecks(t *testing.T) {
	errDown := errors.New("down")
	errLag := errors.New("lagging")
	note := healthz.Note("warming up")
	tests := []struct {
		name                string
		c                   descriptor.Controller
		wantLive, wantReady bool
	}{
		{"no checks", checks{}, true, true},
		{"HealthCheck fails both", general{checks{health: errDown}}, false, false},
		{"LivenessCheck fails liveness only", liveOnly{checks{live: errDown}}, false, true},
		{"ReadinessCheck fails readiness only", readyOnly{checks{ready: errLag}}, true, false},
		{"a Note passes", readyOnly{checks{ready: note}}, true, true},
		{"all pass", allThree{}, true, true},
		{"general fails, specific pass", allThree{checks{health: errDown}}, false, false},
		{
			"readiness fails after a passing general note",
			allThree{checks{health: note, ready: errLag}},
			true,
			false,
		},
		{"liveness fails, readiness passes", allThree{checks{live: errDown}}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live, ready := descriptor.HealthChecks(tt.c)
			if err := live(nil); healthz.Passed(err) != tt.wantLive {
				t.Errorf("live = %v, want passed=%v", err, tt.wantLive)
			}
			if err := ready(nil); healthz.Passed(err) != tt.wantReady {
				t.Errorf("ready = %v, want passed=%v", err, tt.wantReady)
			}
		})
	}
}
