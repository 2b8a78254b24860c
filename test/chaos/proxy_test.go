//go:build chaos || integration

package chaos

import (
	"net"
	"sync"
)

// proxyMode is what a proxy does with a replica's traffic.
type proxyMode int

const (
	forward proxyMode = iota
	// hang accepts connections and reads bytes but forwards nothing, as a
	// black-holed network does; on heal the connections it held are closed,
	// so what they carried is lost.
	hang
	// delay is hang, except that on heal the held bytes flow on, as TCP
	// retransmission delivers them once a partition heals.
	delay
	// cut closes every connection and closes new ones at once.
	cut
	closed
)

// proxy is one replica's TCP path to the API server on loopback.
type proxy struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	cond  *sync.Cond
	mode  proxyMode
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newProxy(upstream string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) set(m proxyMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == closed {
		return
	}
	if p.mode == hang && m == forward {
		for c := range p.conns {
			_ = c.Close()
		}
	}
	p.mode = m
	if m == cut {
		for c := range p.conns {
			_ = c.Close()
		}
	}
	p.cond.Broadcast()
}

// close stops the proxy and waits for every goroutine it started.
func (p *proxy) close() {
	p.mu.Lock()
	p.mode = closed
	for c := range p.conns {
		_ = c.Close()
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}

// track registers c unless the proxy is cut or closed.
func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == cut || p.mode == closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

// pass blocks while the proxy hangs; it reports whether traffic may flow.
func (p *proxy) pass() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.mode == hang || p.mode == delay {
		p.cond.Wait()
	}
	return p.mode == forward
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			_ = c.Close()
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			if !p.pass() {
				return
			}
			up, err := net.Dial("tcp", p.upstream)
			if err != nil {
				return
			}
			if !p.track(up) {
				_ = up.Close()
				return
			}
			defer p.untrack(up)
			done := make(chan struct{}, 2)
			p.wg.Add(2)
			go func() { defer p.wg.Done(); p.pipe(up, c); done <- struct{}{} }()
			go func() { defer p.wg.Done(); p.pipe(c, up); done <- struct{}{} }()
			<-done
			_ = c.Close()
			_ = up.Close()
			<-done
		}()
	}
}

// pipe copies src to dst chunk by chunk, holding each chunk while the proxy
// hangs and dropping the connection when it is cut.
func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.pass() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
