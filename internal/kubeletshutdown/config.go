// Package kubeletshutdown reads a node's kubelet configuration (the
// kubelet's /configz, through the API server's node proxy) and says what
// the kubelet's graceful node shutdown gives the pods still on the node
// when its operating system begins to shut down.
//
// What the configuration shows is what is configured, not what is active:
// the kubelet (pkg/kubelet/nodeshutdown) only watches for a shutdown on
// Linux hosts with systemd-logind on the system D-Bus, where it takes a
// "delay" inhibitor lock; it first raises logind's InhibitDelayMaxSec to
// the whole period (a drop-in file and a reload) and gives up when logind
// still allows less. A failure is logged by the kubelet ("Failed to start
// node shutdown manager") and nothing else: the Node, its conditions and
// its Events say nothing of it until a shutdown begins.
package kubeletshutdown

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// systemCriticalPriority is Kubernetes' SystemCriticalPriority: the kubelet
// puts pods at or above it in the critical group.
const systemCriticalPriority = 2000000000

// PriorityPeriod is one entry of shutdownGracePeriodByPodPriority.
type PriorityPeriod struct {
	Priority                   int32 `json:"priority"`
	ShutdownGracePeriodSeconds int64 `json:"shutdownGracePeriodSeconds"`
}

// Config is the part of a KubeletConfiguration (v1beta1, as /configz
// shows it) that graceful node shutdown reads.
type Config struct {
	ShutdownGracePeriod             time.Duration
	ShutdownGracePeriodCriticalPods time.Duration
	ByPodPriority                   []PriorityPeriod
	// FeatureGates are the gates the kubelet was given (others have their
	// defaults: GracefulNodeShutdown and
	// GracefulNodeShutdownBasedOnPodPriority are on since 1.21 and 1.24).
	FeatureGates map[string]bool
}

// configz is the kubelet's /configz document.
type configz struct {
	KubeletConfig *struct {
		ShutdownGracePeriod              string           `json:"shutdownGracePeriod"`
		ShutdownGracePeriodCriticalPods  string           `json:"shutdownGracePeriodCriticalPods"`
		ShutdownGracePeriodByPodPriority []PriorityPeriod `json:"shutdownGracePeriodByPodPriority"`
		FeatureGates                     map[string]bool  `json:"featureGates"`
	} `json:"kubeletconfig"`
}

// Parse reads the kubelet's /configz answer: {"kubeletconfig": {...}}.
func Parse(b []byte) (Config, error) {
	var z configz
	if err := json.Unmarshal(b, &z); err != nil {
		return Config{}, fmt.Errorf("kubelet configz: %w", err)
	}
	if z.KubeletConfig == nil {
		return Config{}, fmt.Errorf("kubelet configz: no kubeletconfig in %q", truncate(string(b), 80))
	}
	k := z.KubeletConfig
	c := Config{ByPodPriority: k.ShutdownGracePeriodByPodPriority, FeatureGates: k.FeatureGates}
	var err error
	if c.ShutdownGracePeriod, err = duration(k.ShutdownGracePeriod); err != nil {
		return Config{}, fmt.Errorf("kubelet configz: shutdownGracePeriod: %w", err)
	}
	if c.ShutdownGracePeriodCriticalPods, err = duration(k.ShutdownGracePeriodCriticalPods); err != nil {
		return Config{}, fmt.Errorf("kubelet configz: shutdownGracePeriodCriticalPods: %w", err)
	}
	return c, nil
}

func duration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	return time.ParseDuration(s)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// State is what the configuration says of graceful node shutdown.
type State string

const (
	// NotConfigured: no period (shutdownGracePeriod 0 and no
	// shutdownGracePeriodByPodPriority): the kubelet does not delay the
	// shutdown.
	NotConfigured State = "not configured"
	// GateOff: the GracefulNodeShutdown feature gate is off.
	GateOff State = "feature gate off"
	// Configured: the kubelet asks for a shutdown delay; whether it got it
	// is not in the configuration (see the package comment).
	Configured State = "configured"
)

// Verdict is what graceful node shutdown gives pods, as configured.
type Verdict struct {
	State State
	// Total is the delay the kubelet asks systemd-logind for: the sum of
	// its groups' periods (InhibitDelayMaxSec must be at least this).
	Total time.Duration
	// Ordinary is the least time a pod below system-critical priority gets
	// once the shutdown begins: shutdownGracePeriod less
	// shutdownGracePeriodCriticalPods, or the shortest period of the
	// groups below system-critical priority.
	Ordinary time.Duration
	// Critical is the time system-critical pods get after the others.
	Critical time.Duration
	// ByPriority: the periods come from shutdownGracePeriodByPodPriority.
	ByPriority bool
}

// Verdict says what graceful node shutdown gives pods with c, as the
// kubelet reads it (nodeshutdown's newPodManager and migrateConfig).
func (c Config) Verdict() Verdict {
	if on, set := c.FeatureGates["GracefulNodeShutdown"]; set && !on {
		return Verdict{State: GateOff}
	}
	byPriority := len(c.ByPodPriority) > 0
	if on, set := c.FeatureGates["GracefulNodeShutdownBasedOnPodPriority"]; set && !on {
		byPriority = false
	}
	if byPriority {
		return priorityVerdict(c.ByPodPriority)
	}
	if c.ShutdownGracePeriod <= 0 || c.ShutdownGracePeriodCriticalPods > c.ShutdownGracePeriod {
		// The kubelet makes no groups of these (migrateConfig).
		return Verdict{State: NotConfigured}
	}
	return Verdict{State: Configured, Total: c.ShutdownGracePeriod,
		Ordinary: c.ShutdownGracePeriod - c.ShutdownGracePeriodCriticalPods, Critical: c.ShutdownGracePeriodCriticalPods}
}

func priorityVerdict(groups []PriorityPeriod) Verdict {
	v := Verdict{State: Configured, ByPriority: true}
	ordinary := time.Duration(-1)
	lowest := groups[0]
	for _, g := range groups {
		d := time.Duration(g.ShutdownGracePeriodSeconds) * time.Second
		v.Total += d
		if g.Priority < lowest.Priority {
			lowest = g
		}
		if g.Priority >= systemCriticalPriority {
			v.Critical += d
			continue
		}
		if ordinary < 0 || d < ordinary {
			ordinary = d
		}
	}
	if ordinary < 0 {
		// Every group is system-critical or above: the kubelet puts the
		// other pods in the lowest group.
		ordinary = time.Duration(lowest.ShutdownGracePeriodSeconds) * time.Second
	}
	v.Ordinary = ordinary
	if v.Total <= 0 {
		return Verdict{State: NotConfigured, ByPriority: true}
	}
	return v
}

// String is the verdict for people.
func (v Verdict) String() string {
	switch v.State {
	case Configured:
		var b strings.Builder
		if v.ByPriority {
			fmt.Fprintf(&b, "shutdownGracePeriodByPodPriority, %s in all", v.Total)
		} else {
			fmt.Fprintf(&b, "shutdownGracePeriod %s, shutdownGracePeriodCriticalPods %s", v.Total, v.Critical)
		}
		fmt.Fprintf(&b, ": other pods get %s once the shutdown begins, then system-critical pods %s", v.Ordinary, v.Critical)
		return b.String()
	case GateOff:
		return "feature gate GracefulNodeShutdown=false"
	}
	return "not configured (shutdownGracePeriod 0)"
}
