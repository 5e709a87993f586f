package parse

import "strings"

// EnvAssign splits an environment assignment "NAME=value". The name must
// be a portable variable name (letters, digits and underscores, not
// starting with a digit) so that every shell and exec can pass it on. The
// value may be empty and may hold "="; it may not hold a NUL byte, which
// no environment can carry.
func EnvAssign(s string) (name, value string, err error) {
	name, value, ok := strings.Cut(s, "=")
	if !ok {
		return "", "", invalid("environment assignment", s, "use NAME=value")
	}
	if !validEnvName(name) {
		return "", "", invalid("environment assignment", s,
			"the name must be letters, digits and _, not starting with a digit")
	}
	if strings.IndexByte(value, 0) >= 0 {
		return "", "", invalid("environment assignment", s, "the value holds a NUL byte")
	}
	return name, value, nil
}

// validEnvName reports whether name matches [A-Za-z_][A-Za-z0-9_]*.
func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
