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
	b.WriteString("An option that does not apply to the chosen `--mode` is a startup error that names the option and the mode. ")
	b.WriteString("`lifeboat run --help` (and `lifeboat check --help`) print the same list; an unknown flag exits with status 2.\n\n")
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
	b.WriteString("\n## aws-node-termination-handler environment variables\n\n")
	b.WriteString("To ease a migration (see [migration-from-nth.md](migration-from-nth.md)), lifeboat reads the environment variables of ")
	b.WriteString("aws-node-termination-handler that mean the same as one of its flags, as deprecated aliases: each one read is logged as a warning at start. ")
	b.WriteString("A flag or a `LIFEBOAT_*` variable wins over an alias; an alias of an option that does not apply to the mode is ignored with a warning. ")
	b.WriteString("`AWS_REGION` is the AWS SDK's own variable: it keeps working as it did (`--region` wins over it).\n\n")
	b.WriteString("| NTH variable | lifeboat flag | value |\n|---|---|---|\n")
	for _, a := range nthAliases {
		note := a.note
		if note == "" {
			note = "same"
		}
		fmt.Fprintf(&b, "| `%s` | `--%s` | %s |\n", a.env, a.flag, note)
	}
	b.WriteString(nthManagedTagDoc + nthTaintEffectDoc)
	b.WriteString("\nThese NTH variables have no equivalent of the same meaning; lifeboat logs a warning that they have no effect:\n\n")
	b.WriteString("| NTH variable | why |\n|---|---|\n")
	for _, ig := range nthIgnored {
		fmt.Fprintf(&b, "| `%s` | %s |\n", ig.env, ig.why)
	}
	return b.String()
}
