// Package sample exercises every kind of API line.
package sample

import (
	"context"
	"io"
)

// Exported constants, one typed.
const (
	A       = 1
	B int64 = 2
	c       = 3
)

// V is a variable.
var V, w = io.EOF, 1

// T is a struct.
type T struct {
	io.Reader
	Name   string
	Fn     func(ctx context.Context, n int) (err error)
	hidden int
	embedded
}

type embedded struct{}

// New builds a T.
func New(name string, opts ...int) *T { return &T{Name: name} }

// Do is a method.
func (t *T) Do(ctx context.Context) error { return nil }

func (t *T) private() {}

// I is an interface.
type I interface {
	io.Closer
	Run(ctx context.Context) error
	private()
}

// List is generic.
type List[E any] struct{ Items []E }

// Alias is an alias.
type Alias = T

// Kind has typed constants.
type Kind int

// Kinds.
const (
	KindA Kind = iota
	KindB
)
