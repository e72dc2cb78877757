package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// ErrHelp is returned by Load when the arguments ask for help (-h, --help).
var ErrHelp = flag.ErrHelp

// FlagError is an error in the command line itself (an unknown flag, a
// flag without its value, a stray argument), as opposed to a value that
// does not validate.
type FlagError struct{ Err error }

func (e *FlagError) Error() string { return e.Err.Error() }

// NewFlagError returns the error of a flag set's Parse, said with the
// double dash the help shows: "unknown flag --x", "flag --x needs a value".
func NewFlagError(err error) *FlagError {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return &FlagError{Err: fmt.Errorf("unknown flag --%s", strings.TrimLeft(name, "-"))}
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return &FlagError{Err: fmt.Errorf("flag --%s needs a value", strings.TrimLeft(name, "-"))}
	}
	return &FlagError{Err: err}
}
func (e *FlagError) Unwrap() error { return e.Err }

// Flags is the flag set of a subcommand that takes lifeboat's
// configuration (run, check): every option of the table, plus the
// subcommand's own flags defined on FlagSet.
type Flags struct {
	fs   *flag.FlagSet
	c    Config
	errs []error // defaults of the table that do not parse: a defect TestOptionTable catches
	// readFile reads the ServiceAccount's namespace file (os.ReadFile).
	readFile func(string) ([]byte, error)
}

// NewFlags returns the configuration flags of subcommand command.
func NewFlags(command string) *Flags {
	f := &Flags{fs: flag.NewFlagSet("lifeboat "+command, flag.ContinueOnError), readFile: os.ReadFile}
	f.fs.SetOutput(io.Discard)
	for _, o := range options {
		if err := o.bind(f.fs, &f.c, o.name, o.def, o.usage); err != nil {
			f.errs = append(f.errs, err)
		}
	}
	return f
}

// FlagSet is where a subcommand defines its own flags, before Load.
func (f *Flags) FlagSet() *flag.FlagSet { return f.fs }

// Load parses args (without the program and subcommand names) with
// environment fallbacks from getenv; flags win, then LIFEBOAT_* variables,
// then the aws-node-termination-handler variables read as deprecated
// aliases. It returns every problem at once; what does not stop lifeboat
// (deprecated or ignored variables) is in Config.Warnings, for the caller to
// log. An error in the command line itself is a *FlagError; a request for
// help is ErrHelp.
func (f *Flags) Load(args []string, getenv func(string) string) (Config, error) {
	if len(f.errs) > 0 {
		return Config{}, fmt.Errorf("configuration table: %w", errors.Join(f.errs...))
	}
	fs := f.fs
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Config{}, ErrHelp
		}
		return Config{}, NewFlagError(err)
	}
	if fs.NArg() > 0 {
		return Config{}, &FlagError{Err: fmt.Errorf("unexpected arguments: %q", fs.Args())}
	}
	set := map[string]bool{}
	setBy := map[string]string{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true; setBy[fl.Name] = "the command line" })
	var errs []error
	for _, o := range options {
		if set[o.name] {
			continue
		}
		if v := getenv(EnvName(o.name)); v != "" {
			if err := fs.Set(o.name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", EnvName(o.name), v, err))
			} else {
				set[o.name] = true
				setBy[o.name] = EnvName(o.name)
			}
		}
	}
	c := &f.c
	// aws-node-termination-handler's variables come last: every lifeboat
	// flag and variable wins over them.
	warnings, nthErrs := applyNTH(getenv, fs.Set, set, setBy, func() Mode { return c.Mode })
	errs = append(errs, nthErrs...)
	c.Warnings = warnings
	if c.WaitForLoadBalancers && !c.ExcludeFromLB {
		c.Warnings = append(c.Warnings, "--wait-for-load-balancers without --exclude-from-load-balancers: IP targets go with their pods, but instance targets are deregistered only if something else does it; until then each terminate action waits for its deadline")
	}
	errs = append(errs, c.leaseNamespace(getenv, f.readFile)...)
	errs = append(errs, c.validate(set)...)
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return *c, nil
}

// Load is NewFlags("run").Load(args, getenv).
func Load(args []string, getenv func(string) string) (Config, error) {
	return NewFlags("run").Load(args, getenv)
}

// WriteUsage writes the help of the subcommand: its own flags, then every
// configuration flag with its environment variable, default and modes.
func (f *Flags) WriteUsage(w io.Writer) {
	own := []*flag.Flag{}
	f.fs.VisitAll(func(fl *flag.Flag) {
		if !slices.ContainsFunc(options, func(o option) bool { return o.name == fl.Name }) {
			own = append(own, fl)
		}
	})
	if len(own) > 0 {
		fmt.Fprintf(w, "%s flags:\n", f.fs.Name())
		for _, fl := range own {
			typ, usage := flagType(fl)
			def := fl.DefValue
			if def == "" {
				def = "none"
			}
			dash := "--"
			if len(fl.Name) == 1 {
				dash = "-"
			}
			fmt.Fprintf(w, "  %s%s%s\n      %s\n      environment: none; default: %s\n", dash, fl.Name, typ, usage, def)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "configuration flags (each can also be set by the environment variable shown; the command line wins):")
	for _, o := range options {
		typ, usage := flagType(f.fs.Lookup(o.name))
		def := o.def
		if def == "" {
			def = "none"
		}
		modes := "queue, imds"
		if len(o.modes) > 0 {
			modes = joinModes(o.modes)
		}
		fmt.Fprintf(w, "  --%s%s\n      %s\n      environment: %s; default: %s; modes: %s\n",
			o.name, typ, strings.TrimSpace(usage), EnvName(o.name), def, modes)
	}
}

// flagType returns " TYPE" (empty for a boolean flag) and the usage text.
func flagType(fl *flag.Flag) (string, string) {
	typ, usage := flag.UnquoteUsage(fl)
	switch typ {
	case "":
		return "", usage
	case "value":
		typ = "string"
	}
	return " " + typ, usage
}
