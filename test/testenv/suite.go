package testenv

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// Suite is what an end-to-end test package shares: one Kubernetes testbed,
// optionally moto, and the lifeboat binary.
type Suite struct {
	Kube *Env
	// Moto is nil unless SuiteOptions.Moto.
	Moto *Moto
	// Lifeboat is the path of the lifeboat binary built for the suite.
	Lifeboat string
	// Images are the real node's image archives (BuildImages), by
	// reference; nil unless SuiteOptions.Images.
	Images map[string]string
}

// SuiteOptions select a Suite's parts.
type SuiteOptions struct {
	Kube Options
	Moto bool
	// Images builds the real node's images (BuildImages) once for the
	// suite.
	Images bool
	// LifeboatTags are build tags of the suite's lifeboat binary
	// ("imdsonly": lifeboat-imds).
	LifeboatTags []string
}

// SuiteMain starts a Suite, hands it to use (to set the package's
// variables), runs the tests, prints the component logs when a test failed,
// and tears everything down. From TestMain:
//
//	os.Exit(testenv.SuiteMain(m, "e2e", testenv.SuiteOptions{Moto: true}, func(s *testenv.Suite) { suite = s }))
func SuiteMain(m *testing.M, name string, o SuiteOptions, use func(*Suite)) int {
	dir, err := os.MkdirTemp("", "lifeboat-"+name+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	var s Suite
	if s.Lifeboat, err = BuildLifeboat(dir, o.LifeboatTags...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if s.Kube, err = New(ctx, o.Kube); err != nil {
		fmt.Fprintln(os.Stderr, "starting the Kubernetes testbed:", err)
		return 1
	}
	defer s.Kube.Close()
	if o.Moto {
		if s.Moto, err = NewMoto(dir); err != nil {
			fmt.Fprintln(os.Stderr, "starting moto:", err)
			return 1
		}
		defer s.Moto.Proc.Stop()
	}
	if o.Images {
		if s.Images, err = BuildImages(dir); err != nil {
			fmt.Fprintln(os.Stderr, "building the real node's images:", err)
			return 1
		}
	}
	use(&s)
	code := m.Run()
	if code != 0 {
		s.Kube.DumpLogs(os.Stderr, 20)
	}
	return code
}
