// Package tools pins the development tools make runs (staticcheck), in a
// module of their own so that their dependencies never enter the library's
// module graph. Run one with
//
//	go tool -modfile=tools/go.mod staticcheck ./...
package tools
