package parse

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

const sizeHint = "use bytes or a unit like 500k, 64MiB, 1GB"

// sizeUnits maps a lower-case unit to its multiplier. The conventions are
// GNU coreutils' (dd, head -c, truncate): a bare letter and the IEC "iB"
// forms are powers of 1024, the SI "B" forms are powers of 1000.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "ki": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mi": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gi": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "ti": 1 << 40, "tib": 1 << 40, "tb": 1e12,
	"p": 1 << 50, "pi": 1 << 50, "pib": 1 << 50, "pb": 1e15,
}

// Size reads a byte count: a plain number of bytes ("1048576") or a number
// with a unit, case-insensitive ("500k", "64MiB", "1GB", "1.5G"; a space
// between number and unit is allowed). k, M, G, T, P and the KiB forms
// are powers of 1024; kB, MB, GB, TB, PB are powers of 1000. A fractional
// result is rounded down to whole bytes. Negative sizes and sizes that do
// not fit in an int64 are refused.
func Size(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, invalid("size", s, "empty; "+sizeHint)
	}
	if t[0] == '-' {
		return 0, invalid("size", s, "must not be negative")
	}
	t = strings.TrimPrefix(t, "+")
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	if !isDecimal(num) {
		return 0, invalid("size", s, sizeHint)
	}
	mult, ok := sizeUnits[unit]
	if !ok {
		return 0, invalid("size", s, "unknown unit "+strconv.Quote(strings.TrimSpace(t[i:]))+"; "+sizeHint)
	}
	// Exact arithmetic: "1.1GB" must be 1100000000, not a float's guess.
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, invalid("size", s, sizeHint)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	n := new(big.Int).Quo(r.Num(), r.Denom())
	if !n.IsInt64() {
		return 0, invalid("size", s, "too large")
	}
	return n.Int64(), nil
}

// FormatSize writes a byte count as people read it, in units Size reads
// back: "0 B", "512 B", "1.2 KiB", "64 MiB".
func FormatSize(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	f := float64(n)
	u := -1
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	if f >= 100 || f == float64(int64(f)) {
		return fmt.Sprintf("%.0f %s", f, units[u])
	}
	return fmt.Sprintf("%.1f %s", f, units[u])
}
