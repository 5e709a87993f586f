package parse

import "testing"

func TestKeyBytes(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"Enter", "\r"},
		{"enter", "\r"},
		{"C-c", "\x03"},
		{"^D", "\x04"},
		{"C-[", "\x1b"},
		{"C-?", "\x7f"},
		{"C-Space", "\x00"},
		{"C-Up", "\x1b[A"}, // a modified named key is sent unmodified
		{"M-x", "\x1bx"},
		{"S-a", "A"},
		{"Up", "\x1b[A"},
		{"M-Left", "\x1b\x1b[D"},
		{"BSpace", "\x7f"},
		{"Tab", "\t"},
		{"F5", "\x1b[15~"},
		{"0x1b", "\x1b"},
		{"0xe9", "é"},
		{"é", "é"},
		{"q", "q"},
	} {
		got, err := KeyBytes(tc.key)
		if err != nil || string(got) != tc.want {
			t.Errorf("KeyBytes(%q) = %q, %v; want %q", tc.key, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "Entr", "C-", "X-a"} {
		if _, err := KeyBytes(bad); err == nil {
			t.Errorf("KeyBytes(%q) succeeded", bad)
		}
	}
}

func TestKeysBytes(t *testing.T) {
	got, err := KeysBytes([]string{"print(6*7)", "Enter", "C-d"}, false)
	if err != nil || string(got) != "print(6*7)\r\x04" {
		t.Errorf("KeysBytes = %q, %v", got, err)
	}
	got, err = KeysBytes([]string{"Enter", " x"}, true)
	if err != nil || string(got) != "Enter x" {
		t.Errorf("KeysBytes literal = %q, %v", got, err)
	}
}
