// Package checkdocs is `make check-docs`: its test extracts every shell
// command of README.md, docs/*.md and the chart's README that invokes
// lifeboat, make or helm, and runs each one that can run on the testbed;
// the others are listed in its table, each with the reason (docs/testing.md).
package checkdocs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// A Command is one shell command of a document: a line of a shell code
// block, or an inline code span of the prose.
type Command struct {
	// File is the document, relative to the repository root; Line is where
	// the command starts (1-based).
	File string
	Line int
	// Text is the command as a shell reads it: a continued line (ending in
	// a backslash) joined to the next with one space, a console block's
	// "$ " prompt and a trailing comment removed, surrounding blanks
	// trimmed.
	Text string
	// Inline tells a code span of the prose from a code block's line.
	Inline bool
}

// Where names the command's place, file:line.
func (c Command) Where() string { return fmt.Sprintf("%s:%d", c.File, c.Line) }

// Programs are the commands whose invocations are extracted.
var Programs = []string{"lifeboat", "make", "helm"}

// Shell block languages: every line of an sh, bash or shell block is a
// command; in a console block only the lines after a "$ " prompt are, the
// others are output.
var (
	shellLangs   = []string{"sh", "bash", "shell"}
	consoleLangs = []string{"console"}
)

var (
	fence      = regexp.MustCompile("^(\\s*)(```+|~~~+)\\s*(\\S*)")
	inlineCode = regexp.MustCompile("`([^`]+)`")
)

// DocFiles are the documents whose commands are checked: README.md,
// docs/*.md and the chart's README, relative to root.
func DocFiles(root string) ([]string, error) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	files := []string{"README.md", filepath.Join("deploy", "helm", "lifeboat", "README.md")}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			return nil, err
		}
		files = append(files, rel)
	}
	slices.Sort(files)
	return files, nil
}

// Extract returns the commands of one markdown document (file names it in
// the result) that invoke one of Programs. A fenced block without a
// language is an error: a command in it could not be told from output.
func Extract(file, markdown string) ([]Command, error) {
	var out []Command
	add := func(c Command) {
		if Invokes(c.Text, Programs) {
			out = append(out, c)
		}
	}
	lines := strings.Split(markdown, "\n")
	for i := 0; i < len(lines); i++ {
		m := fence.FindStringSubmatch(lines[i])
		if m == nil {
			for _, s := range inlineCode.FindAllStringSubmatch(lines[i], -1) {
				if text := strings.TrimSpace(s[1]); strings.ContainsAny(text, " \t") {
					add(Command{File: file, Line: i + 1, Text: text, Inline: true})
				} // one word is a name in the prose (`lifeboat`), not a command
			}
			continue
		}
		indent, marker, lang := m[1], m[2], m[3]
		if lang == "" {
			return nil, fmt.Errorf("%s:%d: a code block without a language: name it (sh or console for commands, text for output)", file, i+1)
		}
		end := i + 1
		for end < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[end]), marker) {
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("%s:%d: the code block is not closed", file, i+1)
		}
		var body []string
		for _, l := range lines[i+1 : end] {
			body = append(body, strings.TrimPrefix(l, indent))
		}
		switch {
		case slices.Contains(shellLangs, lang):
			for _, c := range blockCommands(file, i+2, body, false) {
				add(c)
			}
		case slices.Contains(consoleLangs, lang):
			for _, c := range blockCommands(file, i+2, body, true) {
				add(c)
			}
		}
		i = end
	}
	return out, nil
}

// blockCommands returns the commands of a shell block whose first line is
// line first of file. In a console block (prompted) only "$ " lines start a
// command.
func blockCommands(file string, first int, body []string, prompted bool) []Command {
	var out []Command
	for i := 0; i < len(body); i++ {
		l := strings.TrimSpace(body[i])
		if prompted {
			cmd, ok := strings.CutPrefix(l, "$ ")
			if !ok {
				continue
			}
			l = cmd
		}
		start := i
		for strings.HasSuffix(l, `\`) && i+1 < len(body) {
			i++
			l = strings.TrimSpace(strings.TrimSuffix(l, `\`)) + " " + strings.TrimSpace(body[i])
		}
		if text := strings.TrimSpace(StripComment(l)); text != "" {
			out = append(out, Command{File: file, Line: first + start, Text: text})
		}
	}
	return out
}

// StripComment removes a shell comment: from an unquoted # that starts a
// word to the end of the line.
func StripComment(line string) string {
	var quote rune
	prev := ' '
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (prev == ' ' || prev == '\t'):
			return line[:i]
		}
		prev = r
	}
	return line
}

// Invokes tells whether a command line runs one of programs: as the command
// word of a simple command (after variable assignments; at the start, after
// |, &&, ||, ; or inside $( )), as the command kubectl exec runs (after
// "--"), or as a kubectl plugin (kubectl lifeboat ...).
func Invokes(line string, programs []string) bool {
	for _, words := range SimpleCommands(line) {
		for len(words) > 0 && assignment.MatchString(words[0]) {
			words = words[1:]
		}
		if len(words) == 0 {
			continue
		}
		if slices.Contains(programs, words[0]) {
			return true
		}
		if words[0] != "kubectl" || len(words) < 2 {
			continue
		}
		if slices.Contains(programs, words[1]) {
			return true // a kubectl plugin: kubectl-lifeboat
		}
		if i := slices.Index(words, "--"); i >= 0 && i+1 < len(words) && slices.Contains(programs, words[i+1]) {
			return true
		}
	}
	return false
}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// SimpleCommands splits a command line into its simple commands, each as
// its words (quotes kept in the words; a comment dropped): the line is cut
// at unquoted |, &, ;, ( and ), and $( starts a command of its own.
func SimpleCommands(line string) [][]string {
	var (
		cmds  [][]string
		words []string
		word  strings.Builder
		quote rune
	)
	endWord := func() {
		if word.Len() > 0 {
			words = append(words, word.String())
			word.Reset()
		}
	}
	endCmd := func() {
		endWord()
		if len(words) > 0 {
			cmds = append(cmds, words)
			words = nil
		}
	}
	rs := []rune(StripComment(line))
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0:
			word.WriteRune(r)
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
			word.WriteRune(r)
		case r == '$' && i+1 < len(rs) && rs[i+1] == '(':
			endWord() // VAR=$(cmd ...): the assignment's value is a command of its own
			cmds = append(cmds, words)
			words = nil
			i++
		case r == ' ' || r == '\t':
			endWord()
		case strings.ContainsRune("|&;()", r):
			endCmd()
		default:
			word.WriteRune(r)
		}
	}
	endCmd()
	return slices.DeleteFunc(cmds, func(c []string) bool { return len(c) == 0 })
}

// ExtractAll returns the commands of every document of DocFiles under root.
func ExtractAll(root string) ([]Command, error) {
	files, err := DocFiles(root)
	if err != nil {
		return nil, err
	}
	var out []Command
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		cmds, err := Extract(f, string(b))
		if err != nil {
			return nil, err
		}
		out = append(out, cmds...)
	}
	return out, nil
}
