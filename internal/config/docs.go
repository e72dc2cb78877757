package config

import (
	"fmt"
	"strings"
)

// Markdown renders the option table of docs/configuration.md. A test keeps
// the committed file equal to it (regenerate with `make docs`).
func Markdown() string {
	var b strings.Builder
	b.WriteString("# Configuration\n\n")
	b.WriteString("Generated from `internal/config` by `make docs`; do not edit by hand.\n\n")
	b.WriteString("Every flag can also be set through the environment variable shown; a flag given on the command line wins. ")
	b.WriteString("An option that does not apply to the chosen `--mode` is a startup error that names the option and the mode.\n\n")
	b.WriteString("| flag | environment | default | modes | meaning |\n|---|---|---|---|---|\n")
	for _, o := range options {
		modes := "queue, imds"
		if len(o.modes) > 0 {
			modes = joinModes(o.modes)
		}
		def := o.def
		if def == "" {
			def = "—"
		} else {
			def = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s | %s | %s |\n", o.name, EnvName(o.name), def, modes, strings.ReplaceAll(o.usage, "|", "\\|"))
	}
	return b.String()
}
