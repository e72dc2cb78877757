package checkdocs

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExtract(t *testing.T) {
	for _, tc := range []struct {
		name, markdown string
		want           []Command
	}{
		{
			name: "sh block: comments, continuations, other programs",
			markdown: strings.Join([]string{
				"# Title",
				"```sh",
				"# a comment line",
				"make demo    # first time: builds the testbed",
				"helm install lifeboat deploy/helm/lifeboat \\",
				"  --set image.tag=0.1.0 \\",
				"  --set x='a # b'",
				"go test ./...",
				"",
				"```",
			}, "\n"),
			want: []Command{
				{File: "f.md", Line: 4, Text: "make demo"},
				{File: "f.md", Line: 5, Text: "helm install lifeboat deploy/helm/lifeboat --set image.tag=0.1.0 --set x='a # b'"},
			},
		},
		{
			name: "console block: prompted lines only",
			markdown: strings.Join([]string{
				"```console",
				"$ kubectl lifeboat status",
				"lifeboat is handling no nodes",
				"$ lifeboat version",
				"```",
			}, "\n"),
			want: []Command{
				{File: "f.md", Line: 2, Text: "kubectl lifeboat status"},
				{File: "f.md", Line: 4, Text: "lifeboat version"},
			},
		},
		{
			name: "indented block of a list item; text and yaml blocks are not commands",
			markdown: strings.Join([]string{
				"1. Install:",
				"   ```sh",
				"   helm upgrade lifeboat deploy/helm/lifeboat",
				"   ```",
				"```text",
				"lifeboat check",
				"```",
				"```yaml",
				"make: test",
				"```",
			}, "\n"),
			want: []Command{{File: "f.md", Line: 3, Text: "helm upgrade lifeboat deploy/helm/lifeboat"}},
		},
		{
			name:     "inline spans: commands, not names",
			markdown: "Run `lifeboat check --help` or `make test`; `lifeboat` is the name, `go test ./...` another program.",
			want: []Command{
				{File: "f.md", Line: 1, Text: "lifeboat check --help", Inline: true},
				{File: "f.md", Line: 1, Text: "make test", Inline: true},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Extract("f.md", tc.markdown)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Extract (-want +got):\n%s", d)
			}
		})
	}
}

// A block without a language could hold a command no one checks: refused.
func TestExtractRefusesBlockWithoutLanguage(t *testing.T) {
	for _, md := range []string{"```\nlifeboat check\n```\n", "```sh\nmake test\n"} {
		if _, err := Extract("f.md", md); err == nil {
			t.Errorf("Extract(%q) succeeded, want an error", md)
		}
	}
}

func TestInvokes(t *testing.T) {
	for _, tc := range []struct {
		line string
		want bool
	}{
		{"lifeboat run --queue-url URL", true},
		{"LIFEBOAT_DRY_RUN=true lifeboat run", true},
		{"make build build-imds && ls -l bin/lifeboat", true},
		{"cd deploy && helm lint lifeboat", true},
		{"kubectl -n kube-system exec deploy/lifeboat -- lifeboat check", true},
		{"kubectl lifeboat status -o json", true},
		{"X=$(lifeboat version)", true},
		{"lifeboat replay FILE|DIR...", true},
		{"aws cloudformation deploy --stack-name lifeboat", false},
		{"kubectl -n kube-system get lease lifeboat -o jsonpath='{.spec.holderIdentity}'", false},
		{"cp lifeboat /usr/local/bin/kubectl-lifeboat", false},
		{"CGO_ENABLED=0 go build -o /tmp/lifeboat ./cmd/lifeboat", false},
		{"echo 'make test' # make test", false},
		{"flock /tmp/lifeboat-testbed.lock go test ./test/e2e", false},
	} {
		if got := Invokes(tc.line, Programs); got != tc.want {
			t.Errorf("Invokes(%q) = %v, want %v (simple commands %q)", tc.line, got, tc.want, SimpleCommands(tc.line))
		}
	}
}
