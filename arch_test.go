package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the package map in docs/architecture.md")

const (
	mapBegin = "<!-- package map: begin (TestArchitectureMap checks it; go test -run TestArchitectureMap -update . rewrites it) -->"
	mapEnd   = "<!-- package map: end -->"
)

// TestArchitectureMap keeps the package map of docs/architecture.md true:
// every package of the module, what it imports of the module, and what
// imports it, as `go list` reports them. A package added, removed or
// given a new import fails the test until the document says so.
func TestArchitectureMap(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/agentjobs/jobs"
	imports := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if name == "" {
			name = "(main)"
		}
		var ours []string
		for _, imp := range p.Imports {
			if rest, ok := strings.CutPrefix(imp, module+"/"); ok {
				ours = append(ours, rest)
			}
		}
		imports[name] = ours
	}
	importedBy := map[string][]string{}
	for p, imps := range imports {
		for _, imp := range imps {
			importedBy[imp] = append(importedBy[imp], p)
		}
	}
	names := make([]string, 0, len(imports))
	for p := range imports {
		names = append(names, p)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString(mapBegin + "\n\n| package | imports | imported by |\n| --- | --- | --- |\n")
	list := func(ps []string) string {
		if len(ps) == 0 {
			return "–"
		}
		slices.Sort(ps)
		return "`" + strings.Join(ps, "`, `") + "`"
	}
	for _, p := range names {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", p, list(imports[p]), list(importedBy[p]))
	}
	b.WriteString("\n" + mapEnd)
	want := b.String()

	const doc = "docs/architecture.md"
	text, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(text)
	i, j := strings.Index(s, mapBegin), strings.Index(s, mapEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no package map between %q and %q", doc, mapBegin, mapEnd)
	}
	got := s[i : j+len(mapEnd)]
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(doc, []byte(s[:i]+want+s[j+len(mapEnd):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the package map in %s is not the module's; run go test -run TestArchitectureMap -update . to rewrite it\nwant:\n%s", doc, want)
}
