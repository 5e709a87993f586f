package vocab_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// vocabWords are the words this package declares, by the field names that
// carry them: a status, a mode, a stdin state, the default scope.
var vocabWords = []struct {
	field *regexp.Regexp
	words []string
}{
	{regexp.MustCompile(`(?i)status$`), []string{"queued", "starting", "running", "done", "failed", "killed", "timed_out", "lost"}},
	{regexp.MustCompile(`(?i)mode$`), []string{"pipe", "tmux", "pty"}},
	{regexp.MustCompile(`(?i)stdin$`), []string{"pipe", "closed", "null"}},
	{regexp.MustCompile(`(?i)scope$`), []string{"default"}},
}

// TestNoVocabularyLiterals: outside this package, no code compares,
// assigns, converts or switches a status, a mode, a stdin state or a scope
// with a string literal of one of this package's words: it uses the
// constant. A literal compiles when misspelt ("timed-out") and then never
// matches. The check reads the syntax: the literal's partner is an
// identifier or field named like the noun (…Status, …Mode, …Stdin,
// …Scope), or a conversion to Status. A profile's own words for a
// status, JSON tags and text for people are other nouns and pass.
func TestNoVocabularyLiterals(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var found []string
	report := func(n ast.Node, what string) {
		p := fset.Position(n.Pos())
		rel, _ := filepath.Rel(root, p.Filename)
		found = append(found, rel+":"+strconv.Itoa(p.Line)+": "+what)
	}
	// word returns the vocabulary word lit is for a partner named name.
	word := func(name string, e ast.Expr) (string, bool) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return "", false
		}
		v, err := strconv.Unquote(lit.Value)
		if err != nil {
			return "", false
		}
		for _, w := range vocabWords {
			if !w.field.MatchString(name) {
				continue
			}
			for _, x := range w.words {
				if v == x {
					return v, true
				}
			}
		}
		return "", false
	}
	name := func(e ast.Expr) string {
		switch e := e.(type) {
		case *ast.Ident:
			return e.Name
		case *ast.SelectorExpr:
			return e.Sel.Name
		case *ast.CallExpr: // string(j.Status)
			if len(e.Args) == 1 {
				if id, ok := e.Fun.(*ast.Ident); ok && id.Name == "string" {
					return nameOf(e.Args[0])
				}
			}
		}
		return ""
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", "testdata", ".git":
				return filepath.SkipDir
			}
			if rel, _ := filepath.Rel(root, path); rel == filepath.Join("internal", "vocab") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if n.Op == token.EQL || n.Op == token.NEQ {
					if w, ok := word(name(n.X), n.Y); ok {
						report(n, strconv.Quote(w)+" compared with "+name(n.X))
					} else if w, ok := word(name(n.Y), n.X); ok {
						report(n, strconv.Quote(w)+" compared with "+name(n.Y))
					}
				}
			case *ast.AssignStmt:
				for i, l := range n.Lhs {
					if i < len(n.Rhs) {
						if w, ok := word(name(l), n.Rhs[i]); ok {
							report(n, strconv.Quote(w)+" assigned to "+name(l))
						}
					}
				}
			case *ast.KeyValueExpr:
				if w, ok := word(name(n.Key), n.Value); ok {
					report(n, strconv.Quote(w)+" as "+name(n.Key))
				}
			case *ast.CallExpr:
				if len(n.Args) == 1 && strings.HasSuffix(name(n.Fun), "Status") {
					if w, ok := word("Status", n.Args[0]); ok {
						report(n, strconv.Quote(w)+" converted to a Status")
					}
				}
			case *ast.SwitchStmt:
				tag := name(n.Tag)
				if tag == "" {
					return true
				}
				for _, s := range n.Body.List {
					for _, e := range s.(*ast.CaseClause).List {
						if w, ok := word(tag, e); ok {
							report(e, strconv.Quote(w)+" as a case of "+tag)
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Error(f + ": use the constant of internal/vocab")
	}
}

// nameOf is the name of an identifier or a field selection, else "".
func nameOf(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return ""
}
