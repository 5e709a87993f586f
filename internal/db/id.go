package db

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
)

// idEncoding is lower-case RFC 4648 base32 without padding: letters and the
// digits 2-7, nothing that needs quoting in a shell.
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewID returns a fresh job or supervisor id: 64 bits from crypto/rand as 13
// lower-case base32 characters.
func NewID() string {
	var b [8]byte
	rand.Read(b[:]) // never returns an error (crypto/rand, Go 1.24+)
	return idEncoding.EncodeToString(b[:])
}

// MinPrefix is the fewest characters of an id that select a job: fewer
// would match too many ids to be worth a query, and could be a name.
const MinPrefix = 4

// IsIDText reports whether s could be an id prefix (see isIDText).
func IsIDText(s string) bool { return isIDText(strings.ToLower(s)) }

// isIDText reports whether s consists only of characters an id can hold, so
// that it can be used as an id prefix.
func isIDText(s string) bool {
	return s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyz234567") == ""
}
