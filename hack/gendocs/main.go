// Command gendocs writes the generated documentation: docs/configuration.md
// and the environment table of docs/migration-from-nth.md.
package main

import (
	"fmt"
	"os"

	"lifeboat.dev/lifeboat/internal/config"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	if err := os.WriteFile("docs/configuration.md", []byte(config.Markdown()), 0o644); err != nil {
		return err
	}
	const migration = "docs/migration-from-nth.md"
	b, err := os.ReadFile(migration)
	if err != nil {
		return err
	}
	doc, err := config.MigrationDoc(string(b))
	if err != nil {
		return fmt.Errorf("%s: %w", migration, err)
	}
	return os.WriteFile(migration, []byte(doc), 0o644)
}
