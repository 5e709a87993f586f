package jobs

import (
	"encoding/json"
	"strings"
	"testing"
)

// Output round-trips any bytes through JSON: text that is not valid UTF-8
// travels in output_base64 as well.
func TestOutputJSONRoundTrip(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	for _, text := range []string{"", "plain\n", "esc \x1b[2J nul \x00", string(all), "\xff\xfe", "日本\xe6"} {
		b, err := json.Marshal(Output{JobID: "x", Text: text, End: int64(len(text))})
		if err != nil {
			t.Fatal(err)
		}
		if has := strings.Contains(string(b), `"output_base64"`); has == validUTF8(text) {
			t.Errorf("%q: output_base64 present = %v", text, has)
		}
		var o Output
		if err := json.Unmarshal(b, &o); err != nil {
			t.Fatal(err)
		}
		if o.Text != text || o.JobID != "x" || o.End != int64(len(text)) {
			t.Errorf("round trip of %q gave %+v", text, o)
		}
	}
}

func validUTF8(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
