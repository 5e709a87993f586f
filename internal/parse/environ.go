package parse

import "strings"

// EnvValue returns the value of the last key= entry of env.
func EnvValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// DedupEnv keeps the last entry of each name, in first-seen order.
func DedupEnv(env []string) []string {
	last := make(map[string]int, len(env))
	for i, e := range env {
		k, _, _ := strings.Cut(e, "=")
		last[k] = i
	}
	out := make([]string, 0, len(last))
	for i, e := range env {
		k, _, _ := strings.Cut(e, "=")
		if last[k] == i {
			out = append(out, e)
		}
	}
	return out
}
