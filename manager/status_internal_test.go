package manager

import (
	"testing"

	"github.com/ctrlhost/ctrlhost/internal/term"
)

// The public phases are the terms' phases, value for value: a
// ControllerStatus converts a term's record by its string.
func TestThePublicPhasesAreTheTermsPhases(t *testing.T) {
	for _, tc := range []struct {
		public Phase
		term   term.Phase
	}{
		{PhaseDisabled, term.PhaseDisabled},
		{PhaseSkipped, term.PhaseSkipped},
		{PhaseWaiting, term.PhaseWaiting},
		{PhaseUnserved, term.PhaseUnserved},
		{PhaseInitializing, term.PhaseInitializing},
		{PhaseNotStarted, term.PhaseNotStarted},
		{PhaseStarting, term.PhaseStarting},
		{PhaseRunning, term.PhaseRunning},
		{PhaseFinished, term.PhaseFinished},
		{PhaseFailed, term.PhaseFailed},
		{PhaseStopped, term.PhaseStopped},
	} {
		if string(tc.public) != string(tc.term) {
			t.Errorf("manager.Phase %q is term.Phase %q", tc.public, tc.term)
		}
	}
}
