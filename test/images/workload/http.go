package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
)

// server is the workload's HTTP server (WORKLOAD_HTTP_PORT).
type server struct {
	srv    *http.Server
	served atomic.Int64
	probed sync.Once
	done   chan error
}

// serve listens on port and serves until stop.
func serve(port string) (*server, error) {
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", port, err)
	}
	s := &server{done: make(chan error, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		s.probed.Do(func() {
			if err := record("readiness-passed"); err != nil {
				fmt.Fprintln(os.Stderr, "workload:", err)
			}
		})
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		s.served.Add(1)
		fmt.Fprintln(w, os.Getenv("POD_NAME"))
	})
	s.srv = &http.Server{Handler: mux}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// stop closes the listener, waits for the requests in flight and records
// http-stopped with the number of requests served.
func (s *server) stop() error {
	if err := s.srv.Shutdown(context.Background()); err != nil {
		return fmt.Errorf("stopping the HTTP server: %w", err)
	}
	if err := <-s.done; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("HTTP server: %w", err)
	}
	return recordValue("http-stopped", strconv.FormatInt(s.served.Load(), 10))
}
