package config

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

// The option table is static: every default must parse with the option's
// own parser (Load refuses to start otherwise), every name must be unique,
// and every option must have a usage text. This test keeps a typo in the
// table from reaching a release.
func TestOptionTable(t *testing.T) {
	f := NewFlags("run")
	if len(f.errs) > 0 {
		t.Fatalf("defaults that do not parse: %v", errors.Join(f.errs...))
	}
	seen := map[string]bool{}
	for _, o := range options {
		if seen[o.name] {
			t.Errorf("--%s defined twice", o.name)
		}
		seen[o.name] = true
		if strings.TrimSpace(o.usage) == "" {
			t.Errorf("--%s has no usage text", o.name)
		}
		if f.fs.Lookup(o.name) == nil {
			t.Errorf("--%s is in the table but not on the flag set", o.name)
		}
	}
}

// A default that does not parse is an error of Load, not a panic.
func TestBadDefaultIsAnError(t *testing.T) {
	var c Config
	tests := []struct {
		name string
		bind binder
		def  string
	}{
		{"duration", durOpt(func(c *Config) *time.Duration { return &c.IMDSPoll }), "a second"},
		{"int", intOpt(func(c *Config) *int { return &c.Workers }), "ten"},
		{"bool", boolOpt(func(c *Config) *bool { return &c.DryRun }), "yes"},
		{"func", funcOpt(func(c *Config, v string) error { return parseKinds(c, v) }), "no-such-kind"},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		if err := tt.bind(fs, &c, "x", tt.def, "usage"); err == nil || !strings.Contains(err.Error(), "default of --x") {
			t.Errorf("%s default %q: error %v, want one naming the flag", tt.name, tt.def, err)
		}
	}
}

// --help lists every flag with its environment variable and default.
func TestWriteUsage(t *testing.T) {
	f := NewFlags("check")
	f.FlagSet().String("output", "table", "table or json")
	var b bytes.Buffer
	f.WriteUsage(&b)
	out := b.String()
	if !strings.Contains(out, "--output string\n      table or json\n      environment: none; default: table") {
		t.Errorf("the subcommand's own flag is missing or wrong:\n%s", out)
	}
	for _, o := range options {
		def := o.def
		if def == "" {
			def = "none"
		}
		if want := "environment: " + EnvName(o.name) + "; default: " + def; !strings.Contains(out, "  --"+o.name+" ") && !strings.Contains(out, "  --"+o.name+"\n") || !strings.Contains(out, want) {
			t.Errorf("usage lacks --%s with %q", o.name, want)
		}
	}
}

func TestLoadHelpAndFlagErrors(t *testing.T) {
	tests := []struct {
		args    []string
		help    bool
		flagErr string
	}{
		{[]string{"--help"}, true, ""},
		{[]string{"-h"}, true, ""},
		{[]string{"--no-such-flag"}, false, "unknown flag --no-such-flag"},
		{[]string{"--workers"}, false, "flag --workers needs a value"},
		{[]string{"stray"}, false, `unexpected arguments: ["stray"]`},
	}
	for _, tt := range tests {
		_, err := Load(tt.args, env(nil))
		if errors.Is(err, ErrHelp) != tt.help {
			t.Errorf("%v: error %v, help = %v", tt.args, err, tt.help)
		}
		var fe *FlagError
		if tt.flagErr != "" && (!errors.As(err, &fe) || fe.Error() != tt.flagErr) {
			t.Errorf("%v: error %v, want FlagError %q", tt.args, err, tt.flagErr)
		}
	}
}
