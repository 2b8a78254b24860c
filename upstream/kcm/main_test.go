package kcm_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Goroutines upstream packages start at import time are not ours.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }
