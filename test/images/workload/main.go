// Command workload is the real node's test workload: a process that records
// its own life, with timestamps, to a file the test reads after the pod is
// gone (a hostPath directory). What it records:
//
//	started, ready            at start
//	prestop-begin, prestop-end from the preStop exec hook (`workload prestop`)
//	sigterm                    when SIGTERM arrives
//	work                       every 200 ms while the SIGTERM handler works
//	work-finished, exit        when the handler finished its work
//	annotations-watched        at start, with WORKLOAD_ANNOTATIONS set
//	deadline-seen              the first time the downward-API annotations
//	                           file shows lifeboat.io/deadline (value: it)
//	readiness-passed           with WORKLOAD_HTTP_PORT: the first readiness
//	                           probe answered (the kubelet marks the pod
//	                           Ready on it)
//	http-stopped               with WORKLOAD_HTTP_PORT: after SIGTERM, the
//	                           server closed its listener and finished the
//	                           requests in flight (value: requests served)
//
// A process killed with SIGKILL (grace period over, machine powered off)
// records nothing more: a sigterm without work-finished, or a started with
// no sigterm at all, means it was cut off.
//
// Configuration, from the environment (the pod spec sets it):
//
//	WORKLOAD_RECORD_DIR  directory of the record files (default /records)
//	POD_NAMESPACE, POD_NAME  name the record file <namespace>_<name>.jsonl
//	WORKLOAD_PRESTOP     how long the preStop hook takes (Go duration)
//	WORKLOAD_SHUTDOWN    how long the SIGTERM handler works (Go duration)
//	WORKLOAD_ANNOTATIONS the pod's annotations file (a downward-API volume),
//	                     read every 100 ms while the process runs
//	WORKLOAD_HTTP_PORT   serve HTTP on this port: / answers 200 with the
//	                     pod's name, /readyz 200 (the readiness probe); on
//	                     SIGTERM the server stops gracefully (no new
//	                     connections, requests in flight finished) before
//	                     the handler's work
//
// The record format is read by lifeboat.dev/lifeboat/test/testenv
// (ReadWorkloadRecord); keep the two in step.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// entry is one line of the record file.
type entry struct {
	Time  time.Time `json:"time"`
	Event string    `json:"event"`
	PID   int       `json:"pid"`
	// Value is what was seen (deadline-seen: the deadline).
	Value string `json:"value,omitempty"`
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "workload:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) > 0 && args[0] == "prestop" {
		return preStop()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	if err := record("started"); err != nil {
		return err
	}
	var web *server
	if port := os.Getenv("WORKLOAD_HTTP_PORT"); port != "" {
		var err error
		if web, err = serve(port); err != nil {
			return err
		}
	}
	if err := record("ready"); err != nil {
		return err
	}
	if path := os.Getenv("WORKLOAD_ANNOTATIONS"); path != "" {
		if err := record("annotations-watched"); err != nil {
			return err
		}
		go watchDeadline(path)
	}
	<-sig
	if err := record("sigterm"); err != nil {
		return err
	}
	if web != nil {
		if err := web.stop(); err != nil {
			return err
		}
	}
	shutdown, err := duration("WORKLOAD_SHUTDOWN")
	if err != nil {
		return err
	}
	end := time.Now().Add(shutdown)
	for time.Now().Before(end) {
		time.Sleep(min(200*time.Millisecond, time.Until(end)))
		if err := record("work"); err != nil {
			return err
		}
	}
	if err := record("work-finished"); err != nil {
		return err
	}
	return record("exit")
}

// watchDeadline reads the downward-API annotations file every 100 ms
// and records deadline-seen, with its value, the first time it shows
// lifeboat.io/deadline. The kubelet replaces the file (a symlink swap)
// when the annotations change.
func watchDeadline(path string) {
	for {
		if b, err := os.ReadFile(path); err == nil {
			if v, ok := annotation(string(b), "lifeboat.io/deadline"); ok {
				if err := recordValue("deadline-seen", v); err != nil {
					fmt.Fprintln(os.Stderr, "workload:", err)
				}
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// annotation finds key in the downward API's format: one key="value"
// line per annotation, the value quoted as Go's strconv.Quote does.
func annotation(file, key string) (string, bool) {
	for _, line := range strings.Split(file, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || k != key {
			continue
		}
		if u, err := strconv.Unquote(v); err == nil {
			return u, true
		}
		return v, true
	}
	return "", false
}

func preStop() error {
	d, err := duration("WORKLOAD_PRESTOP")
	if err != nil {
		return err
	}
	if err := record("prestop-begin"); err != nil {
		return err
	}
	time.Sleep(d)
	return record("prestop-end")
}

func duration(name string) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return d, nil
}

// record appends one entry and syncs it, so that a SIGKILL right after
// loses nothing recorded. O_APPEND keeps the lines of the main process and
// of the preStop hook whole.
func record(event string) error { return recordValue(event, "") }

func recordValue(event, value string) error {
	dir := os.Getenv("WORKLOAD_RECORD_DIR")
	if dir == "" {
		dir = "/records"
	}
	name := os.Getenv("POD_NAMESPACE") + "_" + os.Getenv("POD_NAME") + ".jsonl"
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("opening record: %w", err)
	}
	b, err := json.Marshal(entry{Time: time.Now(), Event: event, PID: os.Getpid(), Value: value})
	if err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("writing record: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("syncing record: %w", err)
	}
	return f.Close()
}
