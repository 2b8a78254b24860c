//go:build !unix

package serving

import (
	"errors"
	"syscall"
)

// reuseAddress: --permit-address-sharing is supported on Unix only.
func reuseAddress(_, _ string, _ syscall.RawConn) error {
	return errors.New("--permit-address-sharing is supported on Unix only")
}
