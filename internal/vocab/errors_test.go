package vocab

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

// TestWireErrorsKeepTheirMeaning sends every sentinel, and each typed
// error, through the wire form as JSON: the error that comes back has the
// same message, matches the same sentinel, and a typed one has its fields.
func TestWireErrorsKeepTheirMeaning(t *testing.T) {
	for _, c := range wireCodes {
		err := fmt.Errorf("job 7fq2: %w", c.err)
		back := roundTrip(t, err)
		if !errors.Is(back, c.err) || back.Error() != err.Error() {
			t.Errorf("%s: came back as %q (matches: %v)", c.code, back, errors.Is(back, c.err))
		}
		for _, other := range wireCodes {
			if other.err != c.err && errors.Is(back, other.err) {
				t.Errorf("%s also matches %s", c.code, other.code)
			}
		}
	}
	lim := &LimitError{Scope: "s", Running: 3, Max: 3}
	var gotLim *LimitError
	if back := roundTrip(t, fmt.Errorf("start: %w", lim)); !errors.As(back, &gotLim) || *gotLim != *lim || !errors.Is(back, ErrLimit) {
		t.Errorf("limit error came back as %#v", back)
	}
	amb := &AmbiguousError{Ref: "7f", Candidates: []string{"7fa", "7fb"}}
	var gotAmb *AmbiguousError
	if back := roundTrip(t, amb); !errors.As(back, &gotAmb) || gotAmb.Ref != "7f" || len(gotAmb.Candidates) != 2 {
		t.Errorf("ambiguous error came back as %#v", back)
	}
	if back := roundTrip(t, errors.New("something else")); back.Error() != "something else" {
		t.Errorf("plain error came back as %q", back)
	}
	if EncodeError(nil) != nil || (*WireError)(nil).Err() != nil {
		t.Error("nil does not stay nil")
	}
}

func roundTrip(t *testing.T, err error) error {
	t.Helper()
	b, jerr := json.Marshal(EncodeError(err))
	if jerr != nil {
		t.Fatal(jerr)
	}
	var w WireError
	if jerr := json.Unmarshal(b, &w); jerr != nil {
		t.Fatal(jerr)
	}
	return w.Err()
}
