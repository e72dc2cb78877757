package testenv

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
)

// PodReach makes a loopback service (the API server, moto, the Auto
// Scaling simulator all listen on 127.0.0.1) reachable from the pods of a
// real node, which run in their own network namespaces behind the node's
// bridge: it forwards TCP from a port on every host address to target, and
// returns the address a pod dials, on the node's bridge gateway (the host
// side of the pod network). The API server's certificate names every
// slot's gateway (see pki.go), so in-cluster TLS verifies as it would
// against a real endpoint. The listener and every open connection close in
// t's cleanup.
//
// The listener binds all addresses because the bridge (and its gateway
// address) only exists once the node's first pod sandbox is set up, after
// the caller needs the address.
func PodReach(t testing.TB, n *RealNode, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatalf("forwarding to %s: %v", target, err)
	}
	f := &forwarder{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go f.serve()
	t.Cleanup(f.close)
	port := ln.Addr().(*net.TCPAddr).Port
	return net.JoinHostPort(n.Gateway(), strconv.Itoa(port))
}

// Gateway is the node's bridge address, the pods' default gateway.
func (n *RealNode) Gateway() string { return slotGateway(n.slot) }

// slotGateway is the bridge address of a real-node slot (host-local hands
// out the .1 of the node's /24 as its gateway).
func slotGateway(slot int) string { return fmt.Sprintf("10.250.%d.1", slot) }

type forwarder struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

func (f *forwarder) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return // closed
		}
		go f.pipe(c)
	}
}

// pipe copies both ways between a pod's connection and the target.
func (f *forwarder) pipe(c net.Conn) {
	up, err := net.Dial("tcp", f.target)
	if err != nil {
		c.Close()
		return
	}
	if !f.track(c, up) {
		return
	}
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done // either side ended: end both
	f.untrack(c, up)
}

func (f *forwarder) track(conns ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *forwarder) untrack(conns ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(f.conns, c)
	}
}

func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	conns := f.conns
	f.conns = map[net.Conn]struct{}{}
	f.mu.Unlock()
	if err := f.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return
	}
	for c := range conns {
		c.Close()
	}
}
