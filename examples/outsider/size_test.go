package main

import (
	"go/scanner"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines bounds the agent's main code: every line of every non-test Go
// file in this directory that is neither blank nor only a comment, imports
// and declarations included. The README states the count this test logs.
const maxLines = 151

// codeLines returns how many lines of src hold at least one token, a line
// inside a multi-line string literal counting as one that does.
func codeLines(t *testing.T, name string, src []byte) int {
	t.Helper()
	fset := token.NewFileSet()
	file := fset.AddFile(name, -1, len(src))
	var s scanner.Scanner
	s.Init(file, src, func(pos token.Position, msg string) { t.Errorf("%s: %s", pos, msg) }, 0) // comments skipped
	lines := map[int]bool{}
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return len(lines)
		}
		if tok == token.SEMICOLON && lit == "\n" {
			continue // inserted at a line's end, never alone on a line
		}
		first := file.Line(pos)
		for l := first; l <= first+strings.Count(lit, "\n"); l++ {
			lines[l] = true
		}
	}
}

func TestMainCodeLines(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		n := codeLines(t, name, src)
		t.Logf("%s: %d lines", name, n)
		total += n
	}
	t.Logf("main code: %d non-blank, non-comment lines (at most %d)", total, maxLines)
	if total > maxLines {
		t.Errorf("main code has %d non-blank, non-comment lines, more than %d", total, maxLines)
	}
}

func TestCodeLinesCounting(t *testing.T) {
	src := "package p\n\n// doc\n/* a\n   b */\nvar s = `x\n\ny` // tail\n\t/* c */ var z int\n"
	if got, want := codeLines(t, "p.go", []byte(src)), 5; got != want {
		t.Errorf("codeLines = %d, want %d (package, the three lines of the raw string, var z)", got, want)
	}
}
