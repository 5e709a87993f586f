package cli

import (
	"runtime/debug"
	"testing"
)

func TestVersionOf(t *testing.T) {
	for _, tc := range []struct {
		main     string
		settings map[string]string
		want     string
	}{
		{"v1.2.3", nil, "v1.2.3"},
		{"(devel)", nil, "0.0.0-devel"},
		{"", nil, "0.0.0-devel"},
		{"(devel)", map[string]string{"vcs.revision": "0123456789abcdef0123", "vcs.modified": "false"}, "0.0.0-devel+0123456789ab"},
		{"(devel)", map[string]string{"vcs.revision": "0123456789abcdef0123", "vcs.modified": "true"}, "0.0.0-devel+0123456789ab.dirty"},
	} {
		bi := &debug.BuildInfo{Main: debug.Module{Version: tc.main}}
		for k, v := range tc.settings {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: k, Value: v})
		}
		if got := versionOf(bi); got != tc.want {
			t.Errorf("versionOf(%q, %v) = %q, want %q", tc.main, tc.settings, got, tc.want)
		}
	}
}
