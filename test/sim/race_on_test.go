//go:build race

package sim

// raceEnabled: the race detector slows a seed about sevenfold.
const raceEnabled = true
