//go:build unix

package serving

import "syscall"

// reuseAddress sets SO_REUSEADDR on the listening socket
// (--permit-address-sharing).
func reuseAddress(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	}); err != nil {
		return err
	}
	return serr
}
