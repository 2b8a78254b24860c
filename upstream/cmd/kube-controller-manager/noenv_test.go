//go:build !integration

package main

// stopShared: unit tests start no environment.
func stopShared() error { return nil }
