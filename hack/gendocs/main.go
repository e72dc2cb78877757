// Command gendocs writes the generated documentation (docs/configuration.md).
package main

import (
	"fmt"
	"os"

	"lifeboat.dev/lifeboat/internal/config"
)

func main() {
	if err := os.WriteFile("docs/configuration.md", []byte(config.Markdown()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
