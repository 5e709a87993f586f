package cli

import (
	"encoding/json"
	"testing"
)

// escapeJSON writes C1 controls and bidi overrides as \u escapes and the
// JSON still decodes to the same text.
func TestEscapeJSON(t *testing.T) {
	in := "a\u0085b\u009bc\u202ed\u2066e\u2069 é 日本"
	raw, err := json.Marshal(map[string]string{"k": in})
	if err != nil {
		t.Fatal(err)
	}
	got := string(escapeJSON(raw))
	want := `{"k":"a\u0085b\u009bc\u202ed\u2066e\u2069 é 日本"}`
	if got != want {
		t.Errorf("escapeJSON = %s, want %s", got, want)
	}
	var back map[string]string
	if err := json.Unmarshal([]byte(got), &back); err != nil || back["k"] != in {
		t.Errorf("escaped JSON decodes to %q (%v), want %q", back["k"], err, in)
	}
}
