package main

import (
	"errors"
	"fmt"
	"io"

	"lifeboat.dev/lifeboat/internal/config"
)

// loadConfig parses the command line of a subcommand that takes the
// configuration (run, check). ok is false when the command has nothing
// more to do: on --help it prints header and every flag on stdout (err
// nil). A wrong command line is a usageError naming the help.
func loadConfig(f *config.Flags, command, header string, args []string, getenv func(string) string, stdout io.Writer) (cfg config.Config, ok bool, err error) {
	cfg, err = f.Load(args, getenv)
	help := "lifeboat " + command + " --help"
	var fe *config.FlagError
	switch {
	case err == nil:
		return cfg, true, nil
	case errors.Is(err, config.ErrHelp):
		fmt.Fprint(stdout, header)
		f.WriteUsage(stdout)
		return cfg, false, nil
	case errors.As(err, &fe):
		return cfg, false, usageError{fe, help}
	default:
		return cfg, false, usageError{fmt.Errorf("configuration:\n%w", err), help}
	}
}
