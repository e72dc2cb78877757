package config

import (
	"fmt"
	"slices"
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
	b.WriteString("To ease a migration (see [migration-from-nth.md](migration-from-nth.md)), lifeboat reads every environment variable of ")
	b.WriteString("aws-node-termination-handler (NTH): each is honoured (read as a deprecated alias of a lifeboat flag, logged as a warning at start), ")
	b.WriteString("honoured with the difference shown (also logged), or refused: lifeboat exits at start naming the variable and what to use instead. None is ignored. ")
	b.WriteString("A flag or a `LIFEBOAT_*` variable wins over an alias; an alias of an option that does not apply to the mode is ignored with a warning, as NTH ignores it in that mode.\n\n")
	b.WriteString(NTHEnvMarkdown())
	return b.String()
}

// NTHEnvMarkdown is the decision table of NTH's environment variables, in
// docs/configuration.md and docs/migration-from-nth.md.
func NTHEnvMarkdown() string {
	var b strings.Builder
	b.WriteString("| NTH variable | decision | lifeboat | notes |\n|---|---|---|---|\n")
	rows := nthRows()
	slices.SortFunc(rows, func(a, b nthRow) int { return strings.Compare(a.env, b.env) })
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.env, r.decision, r.lifeboat, strings.ReplaceAll(r.note, "|", "\\|"))
	}
	return b.String()
}

// The generated part of docs/migration-from-nth.md lies between these
// markers; `make docs` rewrites it and TestMigrationDocUpToDate checks it.
const (
	nthDocBegin = "<!-- generated from internal/config by `make docs`: begin -->\n"
	nthDocEnd   = "<!-- generated: end -->\n"
)

// MigrationDoc returns doc (docs/migration-from-nth.md) with its generated
// part replaced by NTHEnvMarkdown.
func MigrationDoc(doc string) (string, error) {
	before, rest, ok := strings.Cut(doc, nthDocBegin)
	if !ok {
		return "", fmt.Errorf("no line %q", strings.TrimSpace(nthDocBegin))
	}
	_, after, ok := strings.Cut(rest, nthDocEnd)
	if !ok {
		return "", fmt.Errorf("no line %q", strings.TrimSpace(nthDocEnd))
	}
	return before + nthDocBegin + NTHEnvMarkdown() + nthDocEnd + after, nil
}
